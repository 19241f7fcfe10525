// What a write does to the tasks around the one it changes: a parent's subtask counts, the
// `blocked` state of the tasks a task blocks, and the children a moved or deleted task leaves
// behind. Kept by the statement that makes the change (not by triggers), so that each such task
// gets its new version and its `task.updated` in the same statement, with the actor and the
// audience the change's own events have; a trigger would keep the counts but could not write
// those events. Counters, never counted per read: a list stays an index scan (docs/api-guide.md).
import { sql, type RawBuilder } from 'kysely';
import { UUIDV7_SQL } from '../events/outbox.js';
import { audience, taskEventStub } from './change-events.js';

/** A task is at most this many levels deep: a top-level task is level 1. */
export const MAX_TASK_DEPTH = 8;

/**
 * A row of a CTE of deltas (SELECT list), one per change to another task: `task_id`, `subtasks` and
 * `done` (added to its counts), `blockers` (added to its unfinished blockers) and `detach_from`
 * (a task id: the row loses that parent, when it still has it). All parts are SQL.
 */
export const delta = (
  taskId: string,
  parts: { subtasks?: string; done?: string; blockers?: string; detachFrom?: string },
) =>
  `${taskId} AS task_id, (${parts.subtasks ?? '0'})::int AS subtasks, (${parts.done ?? '0'})::int AS done,
   (${parts.blockers ?? '0'})::int AS blockers, (${parts.detachFrom ?? 'NULL'})::uuid AS detach_from`;

/** Whether what a task shows changes (SQL on the row `t` as it was, and the summed deltas `d`). */
const shows = (openBlockers: string) =>
  `(d.subtasks <> 0 OR d.done <> 0 OR d.detach_from IS NOT NULL
    OR (${openBlockers} > 0) <> (${openBlockers} + d.blockers > 0))`;

/**
 * The rows of the CTE `deltas` for tasks that go by a cascade (a project's deletion, an account's),
 * named by the CTE `gone` (id, parent_id, status): what stays of their hierarchy and relations
 * loses them, as when each is deleted alone (store.ts removeTask): a parent outside them loses a
 * subtask, a task they blocked while unfinished loses a blocker, a child outside them becomes
 * top-level. A task among them is never changed: it goes with them.
 */
export const goneDeltas = (gone: string) => `
        SELECT ${delta('g.parent_id', { subtasks: '-1', done: "-(g.status = 'done')::int" })}
        FROM ${gone} g WHERE g.parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ${gone} x WHERE x.id = g.parent_id)
        UNION ALL
        SELECT ${delta('r.other_task_id', { blockers: '-1' })}
        FROM ${gone} g JOIN task_relations r ON r.task_id = g.id AND r.type = 'blocks'
        WHERE g.status <> 'done' AND NOT EXISTS (SELECT 1 FROM ${gone} x WHERE x.id = r.other_task_id)
        UNION ALL
        SELECT ${delta('c.id', { detachFrom: 'g.id' })}
        FROM ${gone} g JOIN tasks c ON c.parent_id = g.id WHERE NOT EXISTS (SELECT 1 FROM ${gone} x WHERE x.id = c.id)`;

/**
 * The CTE `ripple`: applies the CTE `deltas` to the tasks they name, in one UPDATE (a statement
 * cannot update one row from two CTEs), giving a new version at `now` (SQL) to those whose shown
 * state changed. The counters are added, not set, so a row changed meanwhile (the UPDATE waits
 * for its lock and reads it again) keeps the other writer's change. Returns each task's audience
 * columns and `shown`. The written task itself is never among the deltas: it has its own UPDATE.
 */
export const ripple = (now: string) => `
      ripple AS (
        UPDATE tasks t SET
          subtask_count = t.subtask_count + d.subtasks, subtasks_done = t.subtasks_done + d.done,
          open_blockers = t.open_blockers + d.blockers,
          parent_id = CASE WHEN t.parent_id = d.detach_from THEN NULL ELSE t.parent_id END,
          version = t.version + CASE WHEN ${shows('t.open_blockers')} THEN 1 ELSE 0 END,
          updated_at = CASE WHEN ${shows('t.open_blockers')} THEN ${now} ELSE t.updated_at END
        FROM (
          SELECT task_id, sum(subtasks)::int AS subtasks, sum(done)::int AS done, sum(blockers)::int AS blockers,
                 max(detach_from::text)::uuid AS detach_from
          FROM deltas WHERE task_id IS NOT NULL GROUP BY task_id
        ) d
        WHERE t.id = d.task_id
        -- RETURNING reads the row as written: its blockers before were the written ones less the delta.
        RETURNING t.id, t.owner_id, t.assignee_id, t.project_id, ${shows('(t.open_blockers - d.blockers)')} AS shown
      )`;

/**
 * The `task.updated` of every task the ripple changed as shown, as rows of `new_events` (stubs
 * that settleTaskEvents completes), by the actor `actor` (SQL), after the change's own events.
 */
export const rippleEvents = (actor: string) => `
          SELECT ${UUIDV7_SQL} AS id, 'task.updated' AS type, ${taskEventStub('r')} AS data, ${audience('r')} AS audience,
                 ${actor} AS actor_id, 2 AS n
          FROM ripple r WHERE r.shown`;

/**
 * Serialises the changes that attach a task under a parent within one hierarchy: a project's
 * tasks, or one owner's personal tasks (`key`: the project's id, else the owner's, SQL on the
 * statement's rows). Two attachments that each keep the tree sound alone (B under A and A under
 * B; two chains joined past the depth) are then decided one after the other, the second seeing
 * the first. A transaction-scoped advisory lock rather than the rows' locks, as no row is common
 * to every such pair of changes (the ancestors of one and the descendants of the other differ).
 */
export const hierarchyLock = (key: RawBuilder<string | null>) =>
  sql`pg_advisory_xact_lock(hashtextextended('task hierarchy ' || (${key})::text, 0))`;

/**
 * A recursive CTE named `name`: the task `start` (SQL) and its ancestors, each with its `level`
 * counted up from it (1), read at most one level past the limit, which is enough to refuse.
 */
export const ancestors = (name: string, start: string) => `
      ${name} AS (
        SELECT tasks.id, tasks.parent_id, 1 AS level FROM tasks WHERE tasks.id = ${start}
        UNION ALL
        SELECT tasks.id, tasks.parent_id, a.level + 1 FROM tasks JOIN ${name} a ON tasks.id = a.parent_id
        WHERE a.level <= ${MAX_TASK_DEPTH}
      )`;

/** A recursive CTE named `name`: the task `start` (SQL) and its descendants, each with its `height` below it (1). */
export const descendants = (name: string, start: string) => `
      ${name} AS (
        SELECT tasks.id, 1 AS height FROM tasks WHERE tasks.id = ${start}
        UNION ALL
        SELECT tasks.id, d.height + 1 FROM tasks JOIN ${name} d ON tasks.parent_id = d.id
        WHERE d.height <= ${MAX_TASK_DEPTH}
      )`;
