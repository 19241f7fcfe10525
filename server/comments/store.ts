// The comments' writes, each one pipelined transaction as the tasks' are (server/tasks/store.ts):
// the task's row locked first (a comment's create and delete change its commentCount and version,
// so concurrent ones are counted one after another and cannot pass TASK_MAX_COMMENTS together),
// then one statement that decides every check on it and writes, and the events settled in the
// same round trip.
import { expressionBuilder, sql, type RawBuilder } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { AppContext } from '../context.js';
import { rawQuery, tables, type DB } from '../db/query.js';
import type { Statement } from '../db/sql.js';
import { EVENT_WRITES } from '../events/outbox.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { projectRoleOf, visibleHere, visibleTasks, writableHere } from '../tasks/queries.js';
import { audience, settleTaskEvents, touchTaskOf } from '../tasks/change-events.js';
import { commentColumns, commentJson, type CommentRow } from './serialize.js';

/** Opens the subtransaction whose id places the write's events (settleTaskEvents ends it). */
const BEGIN_WRITE: Statement = { text: 'SAVEPOINT write' };

/** Locks the task's row against its other writers (not against references to it). */
const lockTask = (taskId: string | RawBuilder<string>) =>
  tables.selectFrom('tasks').select('tasks.id').where('tasks.id', '=', taskId).forNoKeyUpdate();

/** The task of comment `commentId`, as a value to lock it by. */
const taskOfComment = (commentId: string) =>
  sql<string>`(SELECT comments.task_id FROM comments WHERE comments.id = ${commentId}::uuid)`;

/** The values touchTaskOf writes with and the comment event's id, as a CTE `args`. */
const touchArgs = (actorId: string, now: Date) =>
  sql`args AS (SELECT ${actorId}::uuid AS actor_id, ${now}::timestamptz AS written_at, ${uuidv7()}::uuid AS event_id,
                      ${uuidv7()}::uuid AS comment_event_id)`;

const FROM_ARGS = {
  actor: '(SELECT actor_id FROM args)',
  now: '(SELECT written_at FROM args)',
  eventId: '(SELECT event_id FROM args)',
};

export type CreateVerdict = 'no_task' | 'read_only' | 'full' | 'admitted';
export type CreateOutcome = { kind: Exclude<CreateVerdict, 'admitted'> } | { kind: 'created'; row: CommentRow };

/**
 * Writes a comment with the task's row locked: its checks (the caller sees the task, may change it,
 * the task holds fewer than `maxPerTask`), the row, the task's new version and commentCount,
 * `comment.created` and `task.updated`, in one round trip.
 */
export async function insertComment(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  body: string,
  now: Date,
): Promise<CreateOutcome> {
  const id = uuidv7();
  const { checks, created } = await ctx.db.sql.pipeline({
    lock: lockTask(taskId),
    begin: BEGIN_WRITE,
    checks: rawQuery(sql<{ outcome: CreateVerdict }>`
      WITH ${touchArgs(principal.userId, now)},
      verdict AS (
        SELECT tasks.id, CASE
            WHEN (${visibleHere(visibleTasks(principal))}) IS NOT TRUE THEN 'no_task'
            WHEN (${writableHere(visibleTasks(principal))}) IS NOT TRUE THEN 'read_only'
            WHEN tasks.comment_count >= ${ctx.config.taskMaxComments} THEN 'full'
            ELSE 'admitted' END AS outcome
        FROM tasks WHERE tasks.id = ${taskId}
      ),
      added AS (
        INSERT INTO comments (id, task_id, author_id, body, created_at, updated_at)
        SELECT ${id}, v.id, args.actor_id, ${body}, args.written_at, args.written_at
        FROM verdict v, args WHERE v.outcome = 'admitted'
        RETURNING *
      ),
      ${sql.raw(
        touchTaskOf('added', {
          ...FROM_ARGS,
          set: 'comment_count = t.comment_count + 1',
          also: `SELECT args.comment_event_id AS id, 'comment.created' AS type,
                        jsonb_build_object('comment', ${commentJson('a')}) AS data,
                        ${audience('t')} AS audience, args.actor_id AS actor_id, 0 AS n
                 FROM added a, touched t, args`,
        }),
      )}
      SELECT outcome FROM verdict`),
    settle: settleTaskEvents,
    created: tables.selectFrom('comments').select(commentColumns).where('comments.id', '=', id),
  });
  const [outcome, row] = [checks[0]?.outcome, created[0]];
  if (outcome === undefined) return { kind: 'no_task' };
  if (outcome !== 'admitted') return { kind: outcome };
  if (!row) return { kind: 'no_task' };
  return { kind: 'created', row };
}

export type EditOutcome = { kind: 'not_found' | 'forbidden' } | { kind: 'changed'; row: CommentRow };

/**
 * Replaces a comment's body (its author, while they may change the task) with the comment locked:
 * `comment.updated`, in one round trip. The task does not change: it shows only how many comments
 * it has.
 */
export async function updateComment(
  ctx: AppContext,
  principal: Principal,
  commentId: string,
  body: string,
  now: Date,
): Promise<EditOutcome> {
  const { checks, changed } = await ctx.db.sql.pipeline({
    lock: tables.selectFrom('comments').select('comments.id').where('comments.id', '=', commentId).forNoKeyUpdate(),
    begin: BEGIN_WRITE,
    checks: rawQuery(sql<{ outcome: 'not_found' | 'forbidden' | 'apply' }>`
      WITH args AS (SELECT ${principal.userId}::uuid AS me, ${now}::timestamptz AS written_at),
      verdict AS (
        SELECT comments.id, CASE
            WHEN (${visibleHere(visibleTasks(principal))}) IS NOT TRUE THEN 'not_found'
            WHEN comments.author_id IS DISTINCT FROM args.me OR (${writableHere(visibleTasks(principal))}) IS NOT TRUE THEN 'forbidden'
            ELSE 'apply' END AS outcome
        FROM comments JOIN tasks ON tasks.id = comments.task_id, args WHERE comments.id = ${commentId}
      ),
      edited AS (
        UPDATE comments c SET body = ${body}, updated_at = args.written_at, edited_at = args.written_at
        FROM verdict v, args WHERE c.id = v.id AND v.outcome = 'apply'
        RETURNING c.*
      ),
      new_events AS (
        SELECT ${uuidv7()}::uuid AS id, 'comment.updated' AS type, jsonb_build_object('comment', ${sql.raw(commentJson('c'))}) AS data,
               ${sql.raw(audience('t'))} AS audience, args.me AS actor_id, 1 AS n
        FROM edited c JOIN tasks t ON t.id = c.task_id, args
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT outcome FROM verdict`),
    settle: settleTaskEvents,
    changed: tables.selectFrom('comments').select(commentColumns).where('comments.id', '=', commentId),
  });
  const [outcome, row] = [checks[0]?.outcome, changed[0]];
  if (!outcome || !row || outcome === 'not_found') return { kind: 'not_found' };
  if (outcome === 'forbidden') return { kind: 'forbidden' };
  return { kind: 'changed', row };
}

/**
 * Who may delete the comment in scope, on the task in scope (both seen by the caller): an
 * administrator; its author while they may change the task; an admin of the task's project; the
 * owner of a personal task.
 */
const mayDelete = (principal: Principal) => {
  const eb = expressionBuilder<DB, 'tasks' | 'comments'>();
  return isAdmin(principal)
    ? eb.lit(true)
    : eb.or([
        eb.and([eb('comments.author_id', '=', principal.userId), writableHere(visibleTasks(principal))]),
        eb.and([eb('tasks.project_id', 'is not', null), sql<boolean>`${projectRoleOf(principal.userId)} = 'admin'`]),
        eb.and([eb('tasks.project_id', 'is', null), eb('tasks.owner_id', '=', principal.userId)]),
      ]);
};

/**
 * Deletes a comment with its task's row locked: the task's new version and commentCount,
 * `comment.deleted` and `task.updated`, in one round trip.
 */
export async function removeComment(
  ctx: AppContext,
  principal: Principal,
  commentId: string,
  now: Date,
): Promise<'not_found' | 'forbidden' | 'deleted'> {
  const { checks } = await ctx.db.sql.pipeline({
    lock: lockTask(taskOfComment(commentId)),
    begin: BEGIN_WRITE,
    checks: rawQuery(sql<{ outcome: 'not_found' | 'forbidden' | 'apply' }>`
      WITH ${touchArgs(principal.userId, now)},
      verdict AS (
        SELECT comments.id, CASE
            WHEN (${visibleHere(visibleTasks(principal))}) IS NOT TRUE THEN 'not_found'
            WHEN (${mayDelete(principal)}) IS NOT TRUE THEN 'forbidden'
            ELSE 'apply' END AS outcome
        FROM comments JOIN tasks ON tasks.id = comments.task_id WHERE comments.id = ${commentId}
      ),
      removed AS (DELETE FROM comments c USING verdict v WHERE c.id = v.id AND v.outcome = 'apply' RETURNING c.id, c.task_id),
      ${sql.raw(
        touchTaskOf('removed', {
          ...FROM_ARGS,
          set: 'comment_count = t.comment_count - 1',
          also: `SELECT args.comment_event_id AS id, 'comment.deleted' AS type,
                        jsonb_build_object('commentId', r.id, 'taskId', r.task_id) AS data,
                        ${audience('t')} AS audience, args.actor_id AS actor_id, 0 AS n
                 FROM removed r, touched t, args`,
        }),
      )}
      SELECT outcome FROM verdict`),
    settle: settleTaskEvents,
  });
  const outcome = checks[0]?.outcome;
  if (!outcome || outcome === 'not_found') return 'not_found';
  return outcome === 'forbidden' ? 'forbidden' : 'deleted';
}
