// A task's activity (GET /tasks/{task_id}/activity), derived in one place from the events as they
// are written: every writer's events pass through EVENT_WRITES (outbox.ts), and a `task.updated`
// written as a stub through settleTaskStubs (server/tasks/store.ts), which both write the rows
// here in the statement that writes (or settles) the event. The rows are the task's, not the
// log's: the event retention never cuts them, and they go with the task (foreign key cascade).

/** A SQL text[] of constants (names of this file, never input). */
const constants = (values: readonly string[]) => `ARRAY[${values.map((value) => `'${value}'`).join(', ')}]::text[]`;

/**
 * The task an event concerns first, read from its data (the jsonb expression `data`): a task's
 * own events, its attachments', its comments' and its relations' (whose other task is
 * `otherTask`). NULL for an event of no task.
 */
export const taskOfEvent = (data: string) =>
  `COALESCE(${data} -> 'task' ->> 'id', ${data} ->> 'taskId', ${data} -> 'attachment' ->> 'taskId',
            ${data} -> 'comment' ->> 'taskId', ${data} -> 'relation' ->> 'taskId')::uuid`;

/** A relation's other task, whose activity shows the relation too. */
const otherTask = (data: string) => `(${data} -> 'relation' ->> 'otherTaskId')::uuid`;

/** What a `task.created` entry shows, in this order: the fields set at creation (not null, empty or []). */
const CREATED_FIELDS = [
  'title',
  'description',
  'status',
  'priority',
  'assigneeId',
  'dueAt',
  'projectId',
  'parentId',
  'tags',
] as const;

/** The order of a `task.updated` entry's changes; a field not named here (added later) comes after, by name. */
const FIELD_ORDER = [
  'title',
  'description',
  'status',
  'priority',
  'assigneeId',
  'ownerId',
  'dueAt',
  'completedAt',
  'projectId',
  'parentId',
  'tags',
  'blocked',
  'subtaskCount',
  'subtasksDone',
] as const;

/**
 * Counts an entry of their own already reports (`comment.*`, `attachment.*`): the `task.updated`
 * that only moves them is no entry of its own.
 */
const REPORTED_ELSEWHERE = ['attachmentCount', 'commentCount'] as const;

/** One change `{ field, from, to }` as jsonb. */
const change = (field: string, from: string, to: string) =>
  `jsonb_build_object('field', ${field}, 'from', ${from}, 'to', ${to})`;

/**
 * The `changes` of the event row `e` (type, data) as a jsonb array: NULL for an event that makes
 * no entry (a deletion of the task, an event of no task, a `task.updated` stub not settled yet).
 * A comment shows as `{ id }`, an attachment as `{ id, filename }` added and `{ id }` removed, a
 * relation as its data `{ taskId, type, otherTaskId }` (docs/api-guide.md).
 */
const changesOf = (e: string) => `(CASE ${e}.type
    WHEN 'task.created' THEN (
      SELECT coalesce(jsonb_agg(${change('f.key', 'NULL', `${e}.data -> 'task' -> f.key`)} ORDER BY f.n), '[]'::jsonb)
      FROM unnest(${constants(CREATED_FIELDS)}) WITH ORDINALITY AS f(key, n)
      WHERE ${e}.data -> 'task' -> f.key NOT IN ('null'::jsonb, '""'::jsonb, '[]'::jsonb))
    WHEN 'task.updated' THEN (
      SELECT coalesce(jsonb_agg(${change('p.key', 'p.value', `${e}.data -> 'task' -> p.key`)}
                                ORDER BY array_position(${constants(FIELD_ORDER)}, p.key), p.key), '[]'::jsonb)
      FROM jsonb_each(${e}.data -> 'previous') AS p
      WHERE p.key <> ALL (${constants(REPORTED_ELSEWHERE)}) AND ${e}.data ? 'previous')
    WHEN 'comment.created' THEN jsonb_build_array(${change(`'comment'`, 'NULL', `jsonb_build_object('id', ${e}.data -> 'comment' -> 'id')`)})
    WHEN 'comment.updated' THEN jsonb_build_array(${change(
      `'comment'`,
      `jsonb_build_object('id', ${e}.data -> 'comment' -> 'id')`,
      `jsonb_build_object('id', ${e}.data -> 'comment' -> 'id')`,
    )})
    WHEN 'comment.deleted' THEN jsonb_build_array(${change(`'comment'`, `jsonb_build_object('id', ${e}.data -> 'commentId')`, 'NULL')})
    WHEN 'attachment.created' THEN jsonb_build_array(${change(
      `'attachment'`,
      'NULL',
      `jsonb_build_object('id', ${e}.data -> 'attachment' -> 'id', 'filename', ${e}.data -> 'attachment' -> 'filename')`,
    )})
    WHEN 'attachment.deleted' THEN jsonb_build_array(${change(`'attachment'`, `jsonb_build_object('id', ${e}.data -> 'attachmentId')`, 'NULL')})
    WHEN 'relation.created' THEN jsonb_build_array(${change(`'relation'`, 'NULL', `${e}.data -> 'relation'`)})
    WHEN 'relation.deleted' THEN jsonb_build_array(${change(`'relation'`, `${e}.data -> 'relation'`, 'NULL')})
  END)`;

/**
 * The CTE `activity_rows` that writes the activity of the events in `source` (a CTE with id,
 * type, data, actor_id, occurred_at): one row per event and task it concerns (a relation concerns
 * both its tasks) that still exists, when the event makes an entry (changesOf).
 */
export const activityWrites = (source: string) => `
    activity_rows AS (
      INSERT INTO task_activity (task_id, at, id, actor_id, type, changes)
      SELECT concerned.task_id, src.occurred_at, src.id, src.actor_id, src.type, derived.changes
      FROM ${source} src
      CROSS JOIN LATERAL (SELECT ${changesOf('src')} AS changes) AS derived
      CROSS JOIN LATERAL (
        SELECT DISTINCT x.task_id
        FROM unnest(ARRAY[${taskOfEvent('src.data')}, ${otherTask('src.data')}]) AS x(task_id)
        WHERE x.task_id IS NOT NULL AND EXISTS (SELECT 1 FROM tasks WHERE tasks.id = x.task_id)
      ) AS concerned
      WHERE derived.changes IS NOT NULL AND derived.changes <> '[]'::jsonb
    )`;
