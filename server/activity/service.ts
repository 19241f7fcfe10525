import type { ActivityChange, ActivityEntry, ActivityQuery } from '@task-service/client';
import { sql } from 'kysely';
import type { AppContext } from '../context.js';
import { preparedQuery, tables } from '../db/query.js';
import { invalidCursor, toPage, type Cursor, type ListExchange, type Page } from '../http/pagination.js';
import type { Principal } from '../http/principal.js';
import { findVisibleTaskRef } from '../tasks/service.js';

/** Newest first: by the time of the change, ties broken by id (the primary key's order, read backwards). */
const ACTIVITY_ORDER = '-at';

/** A page of a task's activity after the entry `after` (if any), with one more to tell that a next page exists. */
export const activityPage = (taskId: string, limit: number, after: { at: string; id: string } | undefined) =>
  after === undefined
    ? builtActivityPage({ taskId, at: '', id: '', rows: String(limit + 1) }, 'first')
    : builtActivityPage({ taskId, at: after.at, id: after.id, rows: String(limit + 1) }, 'after');

/** activityPage's two statements, each built once: the page's values are only bound to it. */
const builtActivityPage = preparedQuery(
  (value: (key: 'taskId' | 'at' | 'id' | 'rows') => string, shape: 'first' | 'after') => {
    const page = tables
      .selectFrom('task_activity')
      .select([
        'task_activity.id',
        'task_activity.at',
        'task_activity.actor_id as actorId',
        'task_activity.type',
        // Written by server/events/activity.ts in the contract's shape.
        sql<ActivityChange[]>`task_activity.changes`.as('changes'),
      ])
      .where('task_activity.task_id', '=', value('taskId'))
      .orderBy('task_activity.at', 'desc')
      .orderBy('task_activity.id', 'desc')
      // The row count as a parameter, as a number would be (pg sends both as text).
      .limit(sql<number>`${value('rows')}`);
    return shape === 'first'
      ? page
      : page.where(
          sql<boolean>`(task_activity.at, task_activity.id) < (${value('at')}::timestamptz, ${value('id')}::uuid)`,
        );
  },
);

type ActivityRow = { id: string; at: Date; actorId: string | null; type: string; changes: ActivityChange[] };

const cursorOf = (row: ActivityRow): Cursor => ({ s: ACTIVITY_ORDER, v: row.at.toISOString(), id: row.id });

/** Every change to a task the caller sees, newest first (server/events/activity.ts writes them). */
export async function listActivity(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  query: ActivityQuery,
  http: ListExchange,
): Promise<Page<ActivityEntry>> {
  const cursor = ctx.cursors.decode(query.cursor, ACTIVITY_ORDER);
  if (cursor !== undefined && typeof cursor.v !== 'string') throw invalidCursor();
  await findVisibleTaskRef(ctx, principal, taskId);
  const after = cursor && typeof cursor.v === 'string' ? { at: cursor.v, id: cursor.id } : undefined;
  const rows = await ctx.db.sql.all(activityPage(taskId, query.limit, after));
  return toPage(ctx.cursors, http, rows, query.limit, cursorOf, (row) => ({
    id: row.id,
    at: row.at.toISOString(),
    actorId: row.actorId,
    type: row.type,
    changes: row.changes,
  }));
}
