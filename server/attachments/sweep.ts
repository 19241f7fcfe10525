import type { AppContext } from '../context.js';
import { tables } from '../db/query.js';

/** Older than this, a partial write or an object without a row is abandoned, not in flight. */
export const ORPHAN_GRACE_MS = 15 * 60_000;
const BATCH = 500;

export interface SweepResult {
  staleWrites: number;
  orphans: number;
}

/**
 * Removes what failed uploads and crashes leave behind: partial writes, and stored objects that
 * no attachment row names. Both only once older than the grace period, so an upload that is
 * still between its rename and its insert keeps its bytes.
 */
export async function sweepOrphans(ctx: AppContext, now = new Date()): Promise<SweepResult> {
  const storage = ctx.attachmentStorage;
  const cutoff = new Date(now.getTime() - ORPHAN_GRACE_MS);
  const staleWrites = await storage.removeStaleWrites(cutoff);
  let orphans = 0;
  const removeUnreferenced = async (keys: string[]) => {
    const rows = await ctx.db.sql.all(
      tables.selectFrom('attachments').select('storage_key').where('storage_key', 'in', keys),
    );
    const referenced = new Set(rows.map((row) => row.storage_key));
    for (const key of keys) {
      if (referenced.has(key)) continue;
      await storage.remove(key);
      orphans++;
    }
  };
  let batch: string[] = [];
  for await (const entry of storage.list()) {
    if (entry.modifiedAt >= cutoff) continue;
    batch.push(entry.key);
    if (batch.length === BATCH) {
      await removeUnreferenced(batch);
      batch = [];
    }
  }
  if (batch.length > 0) await removeUnreferenced(batch);
  return { staleWrites, orphans };
}
