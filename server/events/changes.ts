import { z } from 'zod';
import type { ChangesPage, ChangesQuery } from '@task-service/client';
import type { AppContext } from '../context.js';
import { AppError, invalidField } from '../http/errors.js';
import type { Principal } from '../http/principal.js';
import { purgedPast, readerOf, readLog, START, type Position } from './log.js';

// Opaque to clients: a log position, `<txid>.<seq>` in base64url.
const PositionSchema = z.string().regex(/^\d{1,19}\.\d{1,19}$/);

export const encodePosition = (position: Position): string => Buffer.from(`${position.txid}.${position.seq}`).toString('base64url');

export function decodePosition(cursor: string): Position {
  const parsed = PositionSchema.safeParse(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!parsed.success) throw invalidField('query.cursor', 'invalid_cursor', 'Not a cursor this feed issued: use nextCursor from a previous answer');
  const [txid = '0', seq = '0'] = parsed.data.split('.');
  return { txid: BigInt(txid), seq: BigInt(seq) };
}

export const cursorExpired = () =>
  new AppError('cursor_expired', 'Events after this position are past the retention and were deleted: do a full sync, then follow the feed from its new cursor');

/** GET /changes: the caller's events after the cursor, in commit order. */
export async function readChanges(ctx: AppContext, principal: Principal, query: ChangesQuery): Promise<ChangesPage> {
  const after = query.cursor === undefined ? START : decodePosition(query.cursor);
  if (query.cursor !== undefined && (await purgedPast(ctx, after))) throw cursorExpired();
  const page = await readLog(ctx, after, query.limit, readerOf(principal));
  return { items: page.events.map((logged) => logged.event), nextCursor: encodePosition(page.next) };
}
