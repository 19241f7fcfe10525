// What tests read and write straight in the database: to check what a request left behind, or to set
// up what no request can. Built queries (server/db/query.ts) run on the service's own SqlSession.
import type { SelectQueryBuilder } from 'kysely';
import { tables, type DB } from '../../server/db/query.js';
import type { SqlSession } from '../../server/db/sql.js';

/** How many rows `query` finds. */
export async function countOf<T extends keyof DB, O>(
  db: SqlSession,
  query: SelectQueryBuilder<DB, T, O>,
): Promise<number> {
  // count(*) is a bigint, which pg hands over as text.
  const row = await db.first(query.select((eb) => eb.fn.countAll<string>().as('n')));
  return Number(row?.n ?? 0);
}

/** How many tasks there are. */
export const countTasks = (db: SqlSession): Promise<number> => countOf(db, tables.selectFrom('tasks'));

/** How many tasks, tags or webhooks the user owns. */
export const countOwned = (db: SqlSession, kind: 'tasks' | 'tags' | 'webhooks', ownerId: string): Promise<number> =>
  countOf(db, tables.selectFrom(kind).where('owner_id', '=', ownerId));

/** How many attachments the task has. */
export const countAttachments = (db: SqlSession, taskId: string): Promise<number> =>
  countOf(db, tables.selectFrom('attachments').where('task_id', '=', taskId));

/** How many users have this email (0 or 1). */
export const countUsersWithEmail = (db: SqlSession, email: string): Promise<number> =>
  countOf(db, tables.selectFrom('users').where('email', '=', email));

/** How many admins there are. */
export const countAdmins = (db: SqlSession): Promise<number> =>
  countOf(db, tables.selectFrom('users').where('role', '=', 'admin'));

/** A task as stored, by id; throws when there is none. */
export async function storedTask(db: SqlSession, id: string) {
  const task = await db.first(
    tables
      .selectFrom('tasks')
      .select([
        'id',
        'owner_id as ownerId',
        'assignee_id as assigneeId',
        'title',
        'description',
        'status',
        'priority',
        'due_at as dueAt',
        'completed_at as completedAt',
        'version',
        'created_at as createdAt',
        'updated_at as updatedAt',
      ])
      .where('id', '=', id),
  );
  if (!task) throw new Error(`no task ${id} in the database`);
  return task;
}

/** Where an attachment's bytes are stored; throws when there is no such attachment. */
export async function storageKeyOf(db: SqlSession, attachmentId: string): Promise<string> {
  const row = await db.first(tables.selectFrom('attachments').select('storage_key').where('id', '=', attachmentId));
  if (!row) throw new Error(`no attachment ${attachmentId} in the database`);
  return row.storage_key;
}

/** Makes the user an admin directly in the database (the bootstrap path); throws when there is no such user. */
export async function makeAdmin(db: SqlSession, userId: string): Promise<void> {
  const written = await db.write(tables.updateTable('users').set({ role: 'admin' }).where('id', '=', userId));
  if (written !== 1) throw new Error(`no user ${userId} in the database`);
}

/** Writes tags as they are stored, keyed by their name's lower case as the service keys them. */
export async function insertTags(
  db: SqlSession,
  tags: { id: string; ownerId: string; name: string; color: string }[],
): Promise<void> {
  if (tags.length === 0) return; // an INSERT needs at least one row
  await db.write(
    tables.insertInto('tags').values(
      tags.map(({ id, ownerId, name, color }) => ({
        id,
        owner_id: ownerId,
        name,
        name_key: name.toLowerCase(),
        color,
      })),
    ),
  );
}
