// The SQL pieces that write a task change's events, shared by every store whose writes change what
// a task shows (tasks, tags, attachments, comments, relations, projects): who receives them, the
// `task.updated` stub a write leaves, and the statements that complete the stubs (the task as the
// change left it, `previous`, the activity) and place the events in the log.
import { sql, type RawBuilder } from 'kysely';
import { rawQuery, statementOf, type Statement } from '../db/query.js';
import { activityWrites } from '../events/activity.js';
import { EVENT_WRITES, PLACE_NEW_EVENTS, UNPLACED_EVENTS } from '../events/outbox.js';
import { ISO_TIMESTAMP_FORMAT, previousOf, taskBefore, taskJson } from './serialize.js';

/** A timestamp column in SQL text, as the API writes it: for the tag and attachment stores' payloads. */
export const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', ${ISO_TIMESTAMP_FORMAT})`;

/**
 * Who may see a personal task's events besides admins: its owner and assignee, and (`former`) an
 * assignee the change removed. A project's task names nobody: its project's members at the time
 * of reading see it (the events' project_id, server/events/outbox.ts). `formerProject`: the project
 * a move took the task out of, whose members then receive the move.
 */
export const audience = (t: string, former = 'NULL::uuid', formerProject = 'NULL::uuid') =>
  `(CASE WHEN ${t}.project_id IS NULL
     THEN array_remove(ARRAY[${t}.owner_id, NULLIF(${t}.assignee_id, ${t}.owner_id), NULLIF(NULLIF(${former}, ${t}.owner_id), ${t}.assignee_id)], NULL)
     ELSE ARRAY[]::uuid[] END
   || ARRAY(SELECT pm.user_id FROM project_members pm
            WHERE pm.project_id = ${formerProject} AND ${formerProject} IS DISTINCT FROM ${t}.project_id))`;

/** SQL without parameters as text, for the SQL written as strings (the tag, attachment and project stores'). */
const textOf = (raw: RawBuilder<unknown>): string => {
  const statement = statementOf(rawQuery(raw));
  if (statement.values?.length) throw new Error('SQL spliced as text must not take parameters');
  return statement.text;
};

/**
 * A `task.updated` event's data as written by the statement that changes the task's tags,
 * attachments, comments or columns: the task's id and the task as it was before the statement
 * (taskBefore), as that statement does not see its own writes. settleTaskEvents gives it the task
 * as the change left it and the fields that changed (`previous`).
 */
export const taskEventStub = (t: string): string => {
  // Compiled once per row name: every write of a task spells it (a Kysely compile of the whole Task).
  let stub = stubs.get(t);
  if (stub === undefined) {
    stub = `jsonb_build_object('taskId', ${t}.id, 'before', ${textOf(taskBefore(t))}::jsonb)`;
    stubs.set(t, stub);
  }
  return stub;
};

const stubs = new Map<string, string>();

/**
 * The CTEs of a write that changes what a task shows besides its own columns (its tags, its
 * attachments), for the CTE `changed` naming the task in `task_id` (at most one row): `touched`
 * gives it a new version at `now`, `new_events` holds `also` (events of the change itself, which
 * may read `touched t`; n = 0) and the task's `task.updated` with id `eventId`, as a stub for
 * settleTaskEvents. All four are SQL expressions (parameters); `set` more columns to write (a count
 * the task keeps, as `comment_count = t.comment_count + 1`).
 */
export const touchTaskOf = (
  changed: string,
  params: { actor: string; now: string; eventId: string; also?: string; set?: string },
) => `
        touched AS (
          UPDATE tasks t SET version = t.version + 1, updated_at = ${params.now}::timestamptz${params.set ? `, ${params.set}` : ''}
          FROM ${changed} c WHERE t.id = c.task_id
          RETURNING t.id, t.owner_id, t.assignee_id, t.project_id
        ),
        new_events AS (
          ${params.also ? `${params.also} UNION ALL` : ''}
          SELECT ${params.eventId}::uuid AS id, 'task.updated' AS type, ${taskEventStub('t')} AS data, ${audience('t')} AS audience, ${params.actor}::uuid AS actor_id, 1 AS n
          FROM touched t
        ),
        ${EVENT_WRITES}`;

/**
 * Gives each `task.updated` stub written in the subtransaction its task as it now is and `previous`
 * (previousOf the task before), and writes its activity (server/events/activity.ts): settleTaskEvents.
 * OFFSET 0 keeps the task's JSON a value computed once: the planner would otherwise pull the
 * subquery up and build the whole Task again for each field previousOf compares (three quarters
 * of the statement's time).
 */
export const settleTaskStubs: Statement = statementOf(
  rawQuery(sql`WITH settled AS (
      UPDATE events e SET data = jsonb_build_object('task', shown.task, 'previous', ${previousOf(sql`e.data -> 'before'`, sql`shown.task`)}),
        project_id = tasks.project_id
      FROM tasks CROSS JOIN LATERAL (SELECT ${taskJson()}::jsonb AS task OFFSET 0) AS shown
      WHERE e.${sql.raw(UNPLACED_EVENTS)} AND e.type = 'task.updated' AND e.data ? 'taskId'
        AND tasks.id = (e.data ->> 'taskId')::uuid
      RETURNING e.id, e.type, e.data, e.actor_id, e.occurred_at
    ),
    ${sql.raw(activityWrites('settled'))}
    SELECT count(*) FROM settled`),
);

/**
 * The statements that end a write whose events the statement before wrote, a task's as a stub
 * (taskEventStub): each stub gets the task as the change left it, every event written in the
 * subtransaction its place (their ids may be made in SQL: one per task a tag is on), and the
 * subtransaction ends.
 */
export const settleTaskEvents: Statement[] = [
  settleTaskStubs,
  { text: PLACE_NEW_EVENTS },
  { text: 'RELEASE SAVEPOINT write' },
];
