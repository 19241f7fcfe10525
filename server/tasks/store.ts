// The tasks' SQL, reads and writes, in one place. Reads are one statement; each write is
// one pipelined transaction (SqlDatabase.pipeline): one round trip, its locks held only while the
// server runs it, the checks decided in SQL on the rows as they are once locked.
//
// A write that changes an existing task locks its row first, then writes in a subtransaction whose
// id places its events (server/events/outbox.ts): writers of one task are placed in the order they
// commit, as the subtransaction's id is given only once the lock is held.
import type { TaskCreate, TaskPatch } from '@task-service/client';
import { v7 as uuidv7 } from 'uuid';
import type { AppContext } from '../context.js';
import type { SqlSession, Statement } from '../db/sql.js';
import { EVENT_WRITES, PLACE_EVENTS, PLACE_NEW_EVENTS, UNPLACED_EVENTS } from '../events/outbox.js';
import { ifMatchVersions } from '../http/etags.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { claimBounds, claimLock, hasRoom, type QuotaClaim } from '../quotas.js';
import type { TaskRow } from './serialize.js';

// Tags in the order of `tagsByName`; the attachment count as `_count.attachments`: the shape
// Prisma gives with `taskInclude`, so the one serializeTask serves both.
const TASK_ROW = `
  SELECT t.id, t.owner_id AS "ownerId", t.assignee_id AS "assigneeId", t.title, t.description, t.status, t.priority,
    t.due_at AS "dueAt", t.completed_at AS "completedAt", t.version, t.created_at AS "createdAt", t.updated_at AS "updatedAt",
    COALESCE((SELECT json_agg(json_build_object('tag', json_build_object('id', g.id, 'name', g.name, 'color', g.color))
                              ORDER BY g.name_key, g.name, g.id)
              FROM task_tags tt JOIN tags g ON g.id = tt.tag_id WHERE tt.task_id = t.id), '[]'::json) AS tags,
    json_build_object('attachments', (SELECT count(*) FROM attachments a WHERE a.task_id = t.id)) AS "_count"
  FROM tasks t`;

export const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** The contract's Task of the row `t` as jsonb, for events written in SQL (serializeTask's shape, key for key). */
const taskJson = (t: string) => `jsonb_build_object(
    'id', ${t}.id, 'ownerId', ${t}.owner_id, 'assigneeId', ${t}.assignee_id, 'title', ${t}.title, 'description', ${t}.description,
    'status', ${t}.status, 'priority', ${t}.priority, 'dueAt', ${iso(`${t}.due_at`)}, 'completedAt', ${iso(`${t}.completed_at`)},
    'tags', COALESCE((SELECT jsonb_agg(jsonb_build_object('id', g.id, 'name', g.name, 'color', g.color) ORDER BY g.name_key, g.name, g.id)
                      FROM task_tags tt JOIN tags g ON g.id = tt.tag_id WHERE tt.task_id = ${t}.id), '[]'::jsonb),
    'attachmentCount', (SELECT count(*) FROM attachments a WHERE a.task_id = ${t}.id),
    'version', ${t}.version, 'createdAt', ${iso(`${t}.created_at`)}, 'updatedAt', ${iso(`${t}.updated_at`)})`;

/** Who may see a task's events besides admins: its owner and assignee, and (`former`) an assignee the change removed. */
export const audience = (t: string, former = 'NULL::uuid') =>
  `array_remove(ARRAY[${t}.owner_id, NULLIF(${t}.assignee_id, ${t}.owner_id), NULLIF(NULLIF(${former}, ${t}.owner_id), ${t}.assignee_id)], NULL)`;

/** The visibility rule in SQL for the caller `me` (a uuid parameter); admins see every task. NULL where false: test with IS TRUE. */
export const visibleTo = (principal: Principal, t: string, me: string) =>
  isAdmin(principal) ? 'true' : `(${t}.owner_id = ${me} OR ${t}.assignee_id = ${me})`;

/**
 * A page of tasks in one statement: `page` (list-query.ts) picks the ids in their order, and their
 * rows are read in the same statement, in that order (test/list-plans.test.ts explains it).
 */
export const taskPageStatement = (page: Statement): Statement => ({
  text: `WITH page AS (SELECT id, row_number() OVER () AS position FROM (${page.text}) AS picked)
     ${TASK_ROW} JOIN page ON page.id = t.id ORDER BY page.position`,
  values: page.values,
});

export function readTaskPage(ctx: AppContext, page: Statement): Promise<TaskRow[]> {
  const { text, values } = taskPageStatement(page);
  return ctx.db.sql.rows<TaskRow>(text, values);
}

/** The task, if the caller may see it: admins every task, others what they own or are assigned to. */
export async function readVisibleTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
): Promise<TaskRow | undefined> {
  const [row] = isAdmin(principal)
    ? await ctx.db.sql.rows<TaskRow>(`${TASK_ROW} WHERE t.id = $1`, [taskId])
    : await ctx.db.sql.rows<TaskRow>(`${TASK_ROW} WHERE t.id = $1 AND (t.owner_id = $2 OR t.assignee_id = $2)`, [
        taskId,
        principal.userId,
      ]);
  return row;
}

/** The tasks with these ids, in id order, read on `session` (a transaction's sees its own writes). */
export function readTasksOn(session: SqlSession, taskIds: string[]): Promise<TaskRow[]> {
  if (taskIds.length === 0) return Promise.resolve([]);
  return session.rows<TaskRow>(`${TASK_ROW} WHERE t.id = ANY($1::uuid[]) ORDER BY t.id`, [taskIds]);
}

/** The statements that place one event (id `eventId`), written by the statement before, and end its subtransaction. */
const placeEvent = (eventId: string): Statement[] => [
  { text: PLACE_EVENTS, values: [[eventId]] },
  { text: 'RELEASE SAVEPOINT write' },
];

/**
 * A `task.updated` event's data as written by the statement that changes the task's tags or
 * attachments: only the task's id, as that statement does not see its own writes (settleTaskEvents).
 */
export const taskEventStub = (t: string) => `jsonb_build_object('taskId', ${t}.id)`;

/**
 * The CTEs of a write that changes what a task shows besides its own columns (its tags, its
 * attachments), for the CTE `changed` naming the task in `task_id` (at most one row): `touched`
 * gives it a new version at `now`, `new_events` holds `also` (events of the change itself, which
 * may read `touched t`; n = 0) and the task's `task.updated` with id `eventId`, as a stub for
 * settleTaskEvents. All four are SQL expressions (parameters).
 */
export const touchTaskOf = (changed: string, sql: { actor: string; now: string; eventId: string; also?: string }) => `
        touched AS (
          UPDATE tasks t SET version = t.version + 1, updated_at = ${sql.now}::timestamptz
          FROM ${changed} c WHERE t.id = c.task_id
          RETURNING t.id, t.owner_id, t.assignee_id
        ),
        new_events AS (
          ${sql.also ? `${sql.also} UNION ALL` : ''}
          SELECT ${sql.eventId}::uuid AS id, 'task.updated' AS type, ${taskEventStub('t')} AS data, ${audience('t')} AS audience, ${sql.actor}::uuid AS actor_id, 1 AS n
          FROM touched t
        ),
        ${EVENT_WRITES}`;

/**
 * The statements that end a write whose events the statement before wrote, a task's as a stub
 * (taskEventStub): each stub gets the task as the change left it, every event written in the
 * subtransaction its place (their ids may be made in SQL: one per task a tag is on), and the
 * subtransaction ends.
 */
export const settleTaskEvents: Statement[] = [
  {
    text: `UPDATE events e SET data = jsonb_build_object('task', ${taskJson('t')})
           FROM tasks t WHERE e.${UNPLACED_EVENTS} AND e.type = 'task.updated' AND e.data ? 'taskId' AND t.id = (e.data ->> 'taskId')::uuid`,
  },
  { text: PLACE_NEW_EVENTS },
  { text: 'RELEASE SAVEPOINT write' },
];

const rowOf = (rows: unknown[] | undefined): TaskRow | undefined => rows?.[0] as TaskRow | undefined;

export type CreateOutcome = { kind: 'created'; row: TaskRow } | { kind: 'unknown_tag' } | { kind: 'no_room' };

/**
 * Inserts a task with its tag links and its `task.created` event, in one round trip. The claim
 * locks the owner's row (shared far from the limit, else exclusively) and the insert happens only
 * if the owner's holdings leave room and every tag is theirs.
 */
export async function insertTask(
  ctx: AppContext,
  principal: Principal,
  input: TaskCreate,
  claim: QuotaClaim,
  now: Date,
  completedAt: Date | null,
): Promise<CreateOutcome> {
  const id = uuidv7();
  const eventId = uuidv7();
  const tagIds = [...new Set(input.tagIds)];
  const lock = [
    ...claimLock(claim, principal.userId),
    // The tags shared, as a link shares them: a rename or delete of one waits for this create, or
    // this create for it, so the task never carries (or its event names) a tag as it no longer is.
    ...(tagIds.length === 0
      ? []
      : [{ text: 'SELECT 1 FROM tags WHERE id = ANY($1::uuid[]) ORDER BY id FOR SHARE', values: [tagIds] }]),
  ];
  const { room, limit } = claimBounds(claim, 1n);
  const results = await ctx.db.sql.pipeline([
    ...lock,
    {
      text: `
        WITH allowed AS (SELECT 1 WHERE ${hasRoom('tasks', '$2', '$12', '$13')}),
        tags_ok AS (SELECT 1 WHERE (SELECT count(*) FROM tags WHERE id = ANY($11::uuid[]) AND owner_id = $2) = cardinality($11::uuid[])),
        task AS (
          INSERT INTO tasks (id, owner_id, assignee_id, title, description, status, priority, due_at, completed_at, created_at, updated_at)
          SELECT $1, $2, $3, $4, $5, $6::"TaskStatus", $7::"TaskPriority", $8::timestamptz, $9::timestamptz, $10::timestamptz, $10::timestamptz
          FROM allowed, tags_ok
          RETURNING id
        ),
        links AS (INSERT INTO task_tags (task_id, tag_id, created_at) SELECT task.id, tag_id, $10::timestamptz FROM task, unnest($11::uuid[]) AS tag_id)
        SELECT (SELECT count(*) FROM allowed)::int AS allowed, (SELECT count(*) FROM tags_ok)::int AS tags_ok`,
      values: [
        id,
        principal.userId,
        input.assigneeId,
        input.title,
        input.description,
        input.status,
        input.priority,
        input.dueAt,
        completedAt,
        now,
        tagIds,
        room,
        limit,
      ],
    },
    { text: 'SAVEPOINT write' },
    {
      text: `
        WITH new_events AS (
          SELECT $2::uuid AS id, 'task.created' AS type, jsonb_build_object('task', ${taskJson('t')}) AS data,
                 ${audience('t')} AS audience, $3::uuid AS actor_id, 1 AS n
          FROM tasks t WHERE t.id = $1
        ),
        ${EVENT_WRITES}
        SELECT count(*) FROM inserted`,
      values: [id, eventId, principal.userId],
    },
    ...placeEvent(eventId),
    { text: `${TASK_ROW} WHERE t.id = $1`, values: [id] },
  ]);
  const checks = (results[lock.length] as { allowed: number; tags_ok: number }[] | undefined)?.[0];
  const row = rowOf(results[results.length - 1]);
  if (checks?.tags_ok === 0) return { kind: 'unknown_tag' };
  if (checks?.allowed === 0 || !row) return { kind: 'no_room' };
  return { kind: 'created', row };
}

/** What a change's checks found, in the order they are made: the first that fails is the answer. */
export type ChangeOutcome =
  | { kind: 'not_found' }
  | { kind: 'forbidden' }
  | { kind: 'stale'; version: number }
  | { kind: 'unchanged' | 'changed'; row: TaskRow };

interface Verdict {
  outcome: 'not_found' | 'forbidden' | 'stale' | 'unchanged' | 'apply';
  version: number;
}

/**
 * Applies `change` to the task with its row locked: the checks (visible, may reassign, If-Match,
 * changes anything) on the row as it is then, the update, and its `task.updated` event, in one
 * round trip. Only the fields sent are written; `completedAt` follows the status.
 */
export async function updateTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  ifMatch: string | undefined,
  change: TaskPatch,
  now: Date,
): Promise<ChangeOutcome> {
  const eventId = uuidv7();
  const sent = (field: keyof TaskPatch) => `$3::jsonb ? '${field}'`;
  const value = (field: keyof TaskPatch) => `$3::jsonb ->> '${field}'`;
  const next = (field: keyof TaskPatch, column: string, type: string) =>
    `CASE WHEN ${sent(field)} THEN (${value(field)})::${type} ELSE cur.${column} END`;
  const fields: [keyof TaskPatch, string, string][] = [
    ['title', 'title', 'text'],
    ['description', 'description', 'text'],
    ['status', 'status', '"TaskStatus"'],
    ['priority', 'priority', '"TaskPriority"'],
    ['assigneeId', 'assignee_id', 'uuid'],
    ['dueAt', 'due_at', 'timestamptz(3)'],
  ];
  const reassigns = `(${sent('assigneeId')} AND (${value('assigneeId')})::uuid IS DISTINCT FROM cur.assignee_id)`;
  const mayReassign = isAdmin(principal)
    ? 'true'
    : `(cur.owner_id = $2 OR (${value('assigneeId')} IS NULL AND cur.assignee_id = $2))`;
  const results = await ctx.db.sql.pipeline([
    { text: 'SELECT 1 FROM tasks WHERE id = $1 FOR NO KEY UPDATE', values: [taskId] },
    { text: 'SAVEPOINT write' },
    {
      text: `
        WITH cur AS (SELECT * FROM tasks WHERE id = $1),
        proposed AS (SELECT cur.*, ${fields.map(([field, column, type]) => `${next(field, column, type)} AS next_${column}`).join(', ')} FROM cur),
        verdict AS (
          SELECT cur.*, CASE
              WHEN ${visibleTo(principal, 'cur', '$2')} IS NOT TRUE THEN 'not_found'
              WHEN ${reassigns} AND ${mayReassign} IS NOT TRUE THEN 'forbidden'
              WHEN $4::int[] IS NOT NULL AND NOT (cur.version = ANY($4::int[])) THEN 'stale'
              WHEN ${fields.map(([, column]) => `cur.next_${column} IS DISTINCT FROM cur.${column}`).join(' OR ')} THEN 'apply'
              ELSE 'unchanged' END AS outcome
          FROM proposed cur
        ),
        updated AS (
          UPDATE tasks t SET ${fields.map(([, column]) => `${column} = v.next_${column}`).join(', ')},
            completed_at = CASE WHEN v.next_status <> 'done' THEN NULL WHEN v.status = 'done' THEN v.completed_at ELSE $5::timestamptz END,
            version = t.version + 1, updated_at = $5::timestamptz
          FROM verdict v WHERE t.id = v.id AND v.outcome = 'apply'
          RETURNING t.*, v.assignee_id AS former_assignee_id
        ),
        new_events AS (
          SELECT $6::uuid AS id, 'task.updated' AS type, jsonb_build_object('task', ${taskJson('u')}) AS data,
                 ${audience('u', 'u.former_assignee_id')} AS audience, $2::uuid AS actor_id, 1 AS n
          FROM updated u
        ),
        ${EVENT_WRITES}
        SELECT outcome, version FROM verdict`,
      values: [taskId, principal.userId, JSON.stringify(change), ifMatchVersions(ifMatch), now, eventId],
    },
    ...placeEvent(eventId),
    // Read back without the visibility rule: an assignee who just handed the task back made a
    // change that took, even though they no longer see the task.
    { text: `${TASK_ROW} WHERE t.id = $1`, values: [taskId] },
  ]);
  const verdict = (results[2] as Verdict[] | undefined)?.[0];
  const row = rowOf(results[results.length - 1]);
  if (!verdict || !row || verdict.outcome === 'not_found') return { kind: 'not_found' };
  if (verdict.outcome === 'forbidden' || verdict.outcome === 'stale')
    return verdict.outcome === 'stale' ? { kind: 'stale', version: verdict.version } : { kind: 'forbidden' };
  return { kind: verdict.outcome === 'apply' ? 'changed' : 'unchanged', row };
}

export type DeleteOutcome =
  | { kind: 'not_found' }
  | { kind: 'forbidden' }
  | { kind: 'stale'; version: number }
  | { kind: 'deleted'; storageKeys: string[] };

/**
 * Deletes the task (owner or admin) with its row locked against every other lock, so no upload or
 * link is made meanwhile: its attachments' storage keys are then all of them. Writes `task.deleted`.
 */
export async function removeTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  ifMatch: string | undefined,
): Promise<DeleteOutcome> {
  const eventId = uuidv7();
  const mayDelete = isAdmin(principal) ? 'true' : 'cur.owner_id = $2';
  const results = await ctx.db.sql.pipeline([
    { text: 'SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE', values: [taskId] },
    { text: 'SAVEPOINT write' },
    {
      text: `
        WITH verdict AS (
          SELECT cur.*, CASE
              WHEN ${visibleTo(principal, 'cur', '$2')} IS NOT TRUE THEN 'not_found'
              WHEN (${mayDelete}) IS NOT TRUE THEN 'forbidden'
              WHEN $3::int[] IS NOT NULL AND NOT (cur.version = ANY($3::int[])) THEN 'stale'
              ELSE 'apply' END AS outcome
          FROM tasks cur WHERE cur.id = $1
        ),
        doomed AS (SELECT a.storage_key FROM attachments a JOIN verdict v ON a.task_id = v.id AND v.outcome = 'apply'),
        deleted AS (DELETE FROM tasks t USING verdict v WHERE t.id = v.id AND v.outcome = 'apply' RETURNING t.id, t.owner_id, t.assignee_id),
        new_events AS (
          SELECT $4::uuid AS id, 'task.deleted' AS type, jsonb_build_object('taskId', d.id) AS data, ${audience('d')} AS audience, $2::uuid AS actor_id, 1 AS n
          FROM deleted d
        ),
        ${EVENT_WRITES}
        SELECT outcome, version, ARRAY(SELECT storage_key FROM doomed) AS storage_keys FROM verdict`,
      values: [taskId, principal.userId, ifMatchVersions(ifMatch), eventId],
    },
    ...placeEvent(eventId),
  ]);
  const verdict = (results[2] as (Verdict & { storage_keys: string[] })[] | undefined)?.[0];
  if (!verdict || verdict.outcome === 'not_found') return { kind: 'not_found' };
  if (verdict.outcome === 'forbidden') return { kind: 'forbidden' };
  if (verdict.outcome === 'stale') return { kind: 'stale', version: verdict.version };
  return { kind: 'deleted', storageKeys: verdict.storage_keys };
}
