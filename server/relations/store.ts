// The relations' SQL. Each write is one pipelined transaction, as the tasks' are
// (server/tasks/store.ts): the rows locked first, then one statement that decides every check and
// writes the relation, its event, and what it does to the blocked task (its `blocked` state, its
// version and its `task.updated`), and the events settled in the same round trip.
import type { RelationCreate, RelationType, RelationView } from '@task-service/client';
import { MAX_RELATIONS_PER_TASK } from '@task-service/client';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { AppContext } from '../context.js';
import { rawQuery, tables } from '../db/query.js';
import { EVENT_WRITES } from '../events/outbox.js';
import type { Principal } from '../http/principal.js';
import { delta, ripple, rippleEvents } from '../tasks/hierarchy.js';
import { visibleHere, visibleTasks, writableHere } from '../tasks/queries.js';
import { audience, settleTaskEvents } from '../tasks/change-events.js';

/**
 * Locks both tasks' rows against their other writers, in id order (so two relations between the
 * same tasks never wait for each other crosswise): a relation made meanwhile is counted against the
 * limit, and a status change of the blocker is either seen or waits for this write.
 */
const lockBoth = (taskId: string, otherId: string) =>
  tables
    .selectFrom('tasks')
    .select(sql.lit(1).as('locked'))
    .where('tasks.id', '=', sql<string>`ANY(${[taskId, otherId]}::uuid[])`)
    .orderBy('tasks.id')
    .forNoKeyUpdate();

/**
 * A `blocks` cycle can close through any tasks, of any projects and owners, so no row is common to
 * two creations that would close one together (A blocks B and B blocks A at once, or longer loops
 * made of two new relations): creations of `blocks` relations are decided one at a time, under one
 * transaction-scoped advisory lock. They are rare beside other writes, and the lock is held for one
 * round trip; other relation types never take it.
 */
const BLOCKS_LOCK = rawQuery(
  sql`SELECT pg_advisory_xact_lock(hashtextextended('task relations: blocks', 0)) AS locked`,
);

/** How many relations the task `id` (SQL) takes part in, either side: one probe of each index. */
const relationCount = (id: string) =>
  `((SELECT count(*) FROM task_relations WHERE task_id = ${id}) + (SELECT count(*) FROM task_relations WHERE other_task_id = ${id}))`;

export type CreateVerdict = 'not_found' | 'read_only' | 'self' | 'unknown_task' | 'exists' | 'cycle' | 'full' | 'apply';

export interface RelatedTask {
  id: string;
  title: string;
  status: 'todo' | 'in_progress' | 'done';
}

export type CreateOutcome =
  { kind: Exclude<CreateVerdict, 'exists' | 'apply'> } | { kind: 'created' | 'exists'; other: RelatedTask };

/** The other task of a relation as a relation shows it. */
const relatedTask = (id: string) =>
  tables.selectFrom('tasks').select(['tasks.id', 'tasks.title', 'tasks.status']).where('tasks.id', '=', id);

/**
 * Makes the relation `taskId` → `input.taskId` of `input.type`, or finds it made (a `relates_to`
 * made from either side), in one round trip: the checks in order (the first task seen and
 * writable, not the other task itself, the other seen, not made yet, no `blocks` cycle, room on
 * both tasks), the row, `relation.created`, and a `blocks` from an unfinished task makes the other
 * task blocked.
 */
export async function insertRelation(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  input: RelationCreate,
): Promise<CreateOutcome> {
  const otherId = input.taskId;
  const eventId = uuidv7();
  const { verdict, other } = await ctx.db.sql.pipeline({
    lock: [lockBoth(taskId, otherId), ...(input.type === 'blocks' ? [BLOCKS_LOCK] : [])],
    savepoint: { text: 'SAVEPOINT write' },
    verdict: rawQuery(sql<{ outcome: CreateVerdict }>`
      WITH RECURSIVE args AS (
        SELECT ${principal.userId}::uuid AS me, ${new Date()}::timestamptz AS now, ${input.type}::"RelationType" AS type,
               ${taskId}::uuid AS task_id, ${otherId}::uuid AS other_id
      ),
      first AS (
        SELECT tasks.*, (${visibleHere(visibleTasks(principal))}) IS TRUE AS visible, (${writableHere(visibleTasks(principal))}) IS TRUE AS writable
        FROM tasks, args WHERE tasks.id = args.task_id
      ),
      other AS (SELECT tasks.id, (${visibleHere(visibleTasks(principal))}) IS TRUE AS visible FROM tasks, args WHERE tasks.id = args.other_id),
      made_before AS (
        SELECT 1 FROM task_relations r, args
        WHERE (r.task_id = args.task_id AND r.type = args.type AND r.other_task_id = args.other_id)
           OR (args.type = 'relates_to' AND r.task_id = args.other_id AND r.type = 'relates_to' AND r.other_task_id = args.task_id)
      ),
      -- The tasks the other task blocks, transitively: the first among them would close a cycle.
      blocked_after AS (
        SELECT args.other_id AS id FROM args WHERE args.type = 'blocks'
        UNION
        SELECT r.other_task_id FROM task_relations r JOIN blocked_after b ON r.task_id = b.id AND r.type = 'blocks'
      ),
      verdict AS (
        SELECT CASE
            WHEN NOT EXISTS (SELECT 1 FROM first WHERE visible) THEN 'not_found'
            WHEN NOT EXISTS (SELECT 1 FROM first WHERE writable) THEN 'read_only'
            WHEN args.task_id = args.other_id THEN 'self'
            WHEN NOT EXISTS (SELECT 1 FROM other WHERE visible) THEN 'unknown_task'
            WHEN EXISTS (SELECT 1 FROM made_before) THEN 'exists'
            WHEN EXISTS (SELECT 1 FROM blocked_after WHERE id = args.task_id) THEN 'cycle'
            WHEN ${sql.raw(relationCount('args.task_id'))} >= ${MAX_RELATIONS_PER_TASK}
              OR ${sql.raw(relationCount('args.other_id'))} >= ${MAX_RELATIONS_PER_TASK} THEN 'full'
            ELSE 'apply' END AS outcome
        FROM args
      ),
      made AS (
        INSERT INTO task_relations (task_id, type, other_task_id, created_at)
        SELECT args.task_id, args.type, args.other_id, args.now FROM args, verdict WHERE verdict.outcome = 'apply'
        ON CONFLICT DO NOTHING
        RETURNING task_id, type, other_task_id
      ),
      -- A blocker that is not done makes the other task blocked (hierarchy.ts).
      deltas AS (
        SELECT ${sql.raw(delta('m.other_task_id', { blockers: '1' }))}
        FROM made m JOIN first f ON f.id = m.task_id WHERE m.type = 'blocks' AND f.status <> 'done'
      ),
      ${sql.raw(ripple('(SELECT now FROM args)'))},
      new_events AS (
        SELECT ${eventId}::uuid AS id, 'relation.created' AS type,
               jsonb_build_object('relation', jsonb_build_object('taskId', m.task_id, 'type', m.type, 'otherTaskId', m.other_task_id)) AS data,
               ${sql.raw(audience('f'))} AS audience, args.me AS actor_id, 1 AS n
        FROM made m, first f, args
        UNION ALL
        ${sql.raw(rippleEvents('(SELECT me FROM args)'))}
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT outcome FROM verdict`),
    placed: settleTaskEvents,
    other: relatedTask(otherId),
  });
  const outcome = verdict[0]?.outcome ?? 'not_found';
  const [found] = other;
  if (outcome === 'apply' || outcome === 'exists') {
    if (!found) return { kind: 'unknown_task' };
    return { kind: outcome === 'apply' ? 'created' : 'exists', other: found };
  }
  return { kind: outcome };
}

/** The relation as stored, for a type seen from the task `taskId` and the other task `otherId`. */
function stored(
  view: RelationView,
  taskId: string,
  otherId: string,
): { from: string; type: RelationType; to: string; either?: true } {
  switch (view) {
    case 'blocks':
    case 'duplicates':
      return { from: taskId, type: view, to: otherId };
    case 'blocked_by':
      return { from: otherId, type: 'blocks', to: taskId };
    case 'duplicated_by':
      return { from: otherId, type: 'duplicates', to: taskId };
    case 'relates_to':
      // Symmetric: made from either side.
      return { from: taskId, type: 'relates_to', to: otherId, either: true };
  }
}

export type RemoveOutcome = 'not_found' | 'read_only' | 'no_relation' | 'removed';

/**
 * Removes the relation named as `taskId` sees it, in one round trip: the first task seen and
 * writable, the other seen, the relation there; `relation.deleted` from this task's side, and a
 * blocked task that loses its last unfinished blocker is not blocked any more.
 */
export async function deleteRelation(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  view: RelationView,
  otherId: string,
): Promise<RemoveOutcome> {
  const relation = stored(view, taskId, otherId);
  const eventId = uuidv7();
  const { verdict } = await ctx.db.sql.pipeline({
    lock: lockBoth(taskId, otherId),
    savepoint: { text: 'SAVEPOINT write' },
    verdict: rawQuery(sql<{ outcome: RemoveOutcome }>`
      WITH args AS (
        SELECT ${principal.userId}::uuid AS me, ${new Date()}::timestamptz AS now,
               ${taskId}::uuid AS task_id, ${otherId}::uuid AS other_id, ${view}::text AS view
      ),
      first AS (
        SELECT tasks.*, (${visibleHere(visibleTasks(principal))}) IS TRUE AS visible, (${writableHere(visibleTasks(principal))}) IS TRUE AS writable
        FROM tasks, args WHERE tasks.id = args.task_id
      ),
      other AS (SELECT tasks.id, (${visibleHere(visibleTasks(principal))}) IS TRUE AS visible FROM tasks, args WHERE tasks.id = args.other_id),
      verdict AS (
        SELECT CASE
            WHEN NOT EXISTS (SELECT 1 FROM first WHERE visible) THEN 'not_found'
            WHEN NOT EXISTS (SELECT 1 FROM first WHERE writable) THEN 'read_only'
            WHEN NOT EXISTS (SELECT 1 FROM other WHERE visible) THEN 'no_relation'
            ELSE 'apply' END AS outcome
        FROM args
      ),
      removed AS (
        DELETE FROM task_relations r USING verdict
        WHERE verdict.outcome = 'apply' AND r.type = ${relation.type}::"RelationType"
          AND ((r.task_id = ${relation.from}::uuid AND r.other_task_id = ${relation.to}::uuid)
               ${relation.either ? sql`OR (r.task_id = ${relation.to}::uuid AND r.other_task_id = ${relation.from}::uuid)` : sql``})
        RETURNING r.task_id, r.type, r.other_task_id
      ),
      -- The blocked task loses an unfinished blocker (hierarchy.ts).
      deltas AS (
        SELECT ${sql.raw(delta('r.other_task_id', { blockers: '-1' }))}
        FROM removed r JOIN tasks blocker ON blocker.id = r.task_id WHERE r.type = 'blocks' AND blocker.status <> 'done'
      ),
      ${sql.raw(ripple('(SELECT now FROM args)'))},
      new_events AS (
        SELECT ${eventId}::uuid AS id, 'relation.deleted' AS type,
               jsonb_build_object('relation', jsonb_build_object('taskId', args.task_id, 'type', args.view, 'otherTaskId', args.other_id)) AS data,
               ${sql.raw(audience('f'))} AS audience, args.me AS actor_id, 1 AS n
        FROM first f, args WHERE EXISTS (SELECT 1 FROM removed)
        UNION ALL
        ${sql.raw(rippleEvents('(SELECT me FROM args)'))}
      ),
      ${sql.raw(EVENT_WRITES)}
      SELECT CASE WHEN outcome = 'apply' AND NOT EXISTS (SELECT 1 FROM removed) THEN 'no_relation'
                  WHEN outcome = 'apply' THEN 'removed' ELSE outcome END AS outcome
      FROM verdict`),
    placed: settleTaskEvents,
  });
  return verdict[0]?.outcome ?? 'not_found';
}

/** The relations of the task `taskId` seen from it, each with its other task, of those the caller sees: oldest first. */
export async function readRelations(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
): Promise<{ type: RelationView; task: RelatedTask }[]> {
  const rows = await ctx.db.sql.all(
    rawQuery(sql<{ type: RelationView; id: string; title: string; status: RelatedTask['status'] }>`
      SELECT rel.type, tasks.id, tasks.title, tasks.status
      FROM (
        SELECT r.type::text AS type, r.other_task_id AS other_id, r.created_at FROM task_relations r WHERE r.task_id = ${taskId}
        UNION ALL
        SELECT CASE r.type WHEN 'blocks' THEN 'blocked_by' WHEN 'duplicates' THEN 'duplicated_by' ELSE 'relates_to' END,
               r.task_id, r.created_at
        FROM task_relations r WHERE r.other_task_id = ${taskId}
      ) rel JOIN tasks ON tasks.id = rel.other_id
      WHERE ${visibleHere(visibleTasks(principal))}
      ORDER BY rel.created_at, tasks.id, rel.type`),
  );
  return rows.map((row) => ({ type: row.type, task: { id: row.id, title: row.title, status: row.status } }));
}
