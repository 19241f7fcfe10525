import type { Logger } from 'pino';
import { tables } from '../db/query.js';
import type { SqlSession } from '../db/sql.js';
import type { AttachmentStorage } from './storage.js';

/**
 * The storage keys of the attachments that go with a user's account (those on their tasks and those
 * they uploaded), to read before the rows are deleted: a query for a pipeline or a SqlSession.
 */
export const userStorageKeys = (userId: string) =>
  tables
    .selectFrom('attachments')
    .innerJoin('tasks', 'tasks.id', 'attachments.task_id')
    .select('attachments.storage_key as storageKey')
    .where((eb) => eb.or([eb('tasks.owner_id', '=', userId), eb('attachments.uploaded_by', '=', userId)]));

/** userStorageKeys, read in `db` (the transaction that deletes the user, after it locked the user's row). */
export async function storageKeysOfUser(db: SqlSession, userId: string): Promise<string[]> {
  return (await db.all(userStorageKeys(userId))).map((row) => row.storageKey);
}

/**
 * Removes bytes whose rows are already gone. Best effort: a failure is logged, and the orphan
 * sweep removes what is left.
 */
export async function discardStoredBytes(
  ctx: { attachmentStorage: AttachmentStorage; logger: Logger },
  keys: string[],
): Promise<void> {
  for (const key of keys) {
    await ctx.attachmentStorage.remove(key).catch((error: unknown) => {
      ctx.logger.warn(
        { err: error, storageKey: key },
        'could not remove attachment bytes; the orphan sweep will retry',
      );
    });
  }
}
