import type { Task, TaskBefore } from '@task-service/client';
import { sql, type Expression, type RawBuilder, type Selectable } from 'kysely';
import { tables, type DB } from '../db/query.js';

/** The form of a timestamp in the API (Date.prototype.toISOString's), as to_char writes it. */
export const ISO_TIMESTAMP_FORMAT = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;

/** A timestamp as the API writes it (NULL stays NULL). */
export const isoTimestamp = (value: Expression<Date | null>): RawBuilder<string | null> =>
  sql<string | null>`to_char(${value} AT TIME ZONE 'UTC', ${sql.raw(ISO_TIMESTAMP_FORMAT)})`;

type TaskColumns = Selectable<DB['tasks']>;

/** What can be ordered by a column of tags: a query on tags, or an aggregate of them. */
interface OrderableByTag<T> {
  orderBy(column: 'tags.name_key' | 'tags.name' | 'tags.id'): T;
}

/** Tags by name ignoring case, ties broken by id: for tag lists and for a task's `tags` (an aggregate's order). */
export const byName = <T extends OrderableByTag<T>>(tags: T): T =>
  tags.orderBy('tags.name_key').orderBy('tags.name').orderBy('tags.id');

/** A task's `tags` (the task's id `taskId`): by name, as JSON. */
const tagsOfTask = (taskId: Expression<string>) =>
  tables
    .selectFrom('task_tags')
    .innerJoin('tags', 'tags.id', 'task_tags.tag_id')
    .where('task_tags.task_id', '=', taskId)
    .select((eb) =>
      sql<Task['tags']>`COALESCE(${byName(
        eb.fn.agg('json_agg', [sql`json_build_object('id', tags.id, 'name', tags.name, 'color', tags.color)`]),
      )}, '[]'::json)`.as('tags'),
    );

/**
 * The Task of the API, of the task row named `row` (a table alias, or a CTE with the columns of
 * tasks), as JSON: the one definition of what a task shows. Answers read it; events store it
 * (cast to jsonb), so a task's event carries exactly what the API answers for it after the write.
 */
export function taskJson(row = 'tasks'): RawBuilder<Task> {
  const column = <C extends keyof TaskColumns>(name: C) => sql.ref<TaskColumns[C]>(`${row}.${name}`);
  return sql<Task>`json_build_object(
    'id', ${column('id')}, 'ownerId', ${column('owner_id')}, 'assigneeId', ${column('assignee_id')},
    'projectId', ${column('project_id')}, 'parentId', ${column('parent_id')},
    'title', ${column('title')}, 'description', ${column('description')},
    'status', ${column('status')}, 'priority', ${column('priority')},
    'dueAt', ${isoTimestamp(column('due_at'))}, 'completedAt', ${isoTimestamp(column('completed_at'))},
    'tags', ${tagsOfTask(column('id'))},
    'attachmentCount', (SELECT count(*) FROM attachments WHERE attachments.task_id = ${column('id')}),
    'commentCount', ${column('comment_count')},
    'subtaskCount', ${column('subtask_count')}, 'subtasksDone', ${column('subtasks_done')},
    'blocked', ${column('open_blockers')} > 0,
    'version', ${column('version')},
    'createdAt', ${isoTimestamp(column('created_at'))}, 'updatedAt', ${isoTimestamp(column('updated_at'))})`;
}

/**
 * The task row named `row` as it was before the statement that reads it changed it: a statement
 * sees the rows as they were when it began, its own writes (the task's columns, tags, attachments,
 * comments) not included. What a change's `task.updated` compares the task after it with (previousOf).
 */
export const taskBefore = (row: string): RawBuilder<Task> =>
  sql<Task>`(SELECT ${taskJson('b')} FROM tasks b WHERE b.id = ${sql.ref(`${row}.id`)})`;

/**
 * A `task.updated`'s `previous`: the fields of the Task JSON `before` (jsonb) whose value differs
 * in `after` (jsonb), with their values before; never `version` or `updatedAt`, which every change
 * moves. Generic over the Task's fields, so every writer, and every field added later, gets it.
 */
export const previousOf = (before: Expression<unknown>, after: Expression<unknown>): RawBuilder<TaskBefore> =>
  sql<TaskBefore>`(SELECT coalesce(jsonb_object_agg(was.key, was.value), '{}'::jsonb)
    FROM jsonb_each(${before}) AS was
    WHERE was.key NOT IN ('version', 'updatedAt') AND was.value IS DISTINCT FROM (${after}) -> was.key)`;
