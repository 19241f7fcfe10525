// The task row as the stack baseline reads it (with its tags and attachment count), as JSON, and the
// read of one task the caller may see (GET /tasks/{id}): one statement, the visibility rule in it, as
// the service's (server/tasks/store.ts readVisibleTask).
import type { Caller } from './stack-caller.js';
import type { ServiceStatement, StackConfig } from './stack-config.js';
import type { StackDb } from './stack-db.js';

export interface TaskRow {
  id: string;
  owner_id: string;
  assignee_id: string | null;
  project_id: string | null;
  title: string;
  description: string;
  status: string;
  priority: string;
  due_at: Date | null;
  completed_at: Date | null;
  version: number;
  created_at: Date;
  updated_at: Date;
  tags: { id: string; name: string; color: string }[];
  attachment_count: number;
}

/** The tags of task `t` by name, as JSON. */
export const TAGS_OF_TASK = `coalesce((SELECT json_agg(json_build_object('id', g.id, 'name', g.name, 'color', g.color) ORDER BY g.name_key, g.name, g.id)
  FROM task_tags tt JOIN tags g ON g.id = tt.tag_id WHERE tt.task_id = t.id), '[]')`;

/** The attachment count of task `t`: stored on the task, or counted, as the schema of the day has it. */
export const attachmentCountOfTask = (config: StackConfig) =>
  config.storedAttachmentCount
    ? 't.attachment_count'
    : '(SELECT count(*)::int FROM attachments a WHERE a.task_id = t.id)';

/** The columns of a TaskRow, from a table aliased `t`. */
export const taskColumns = (config: StackConfig) => `
  t.id, t.owner_id, t.assignee_id, t.project_id, t.title, t.description, t.status, t.priority, t.due_at, t.completed_at, t.version, t.created_at, t.updated_at,
  ${TAGS_OF_TASK} AS tags, ${attachmentCountOfTask(config)} AS attachment_count`;

export const isAdmin = (caller: Caller) => caller.role === 'admin';

/** The task if the caller may see it: admins every task, others what they own or are assigned to. */
export async function readVisibleTask(
  db: StackDb,
  config: StackConfig,
  caller: Caller,
  taskId: string,
): Promise<TaskRow | undefined> {
  const { rows } = isAdmin(caller)
    ? await db.query<TaskRow>(`SELECT ${taskColumns(config)} FROM tasks t WHERE t.id = $1`, [taskId])
    : await db.query<TaskRow>(
        `SELECT ${taskColumns(config)} FROM tasks t WHERE t.id = $1 AND (t.owner_id = $2 OR t.assignee_id = $2)`,
        [taskId, caller.userId],
      );
  return rows[0];
}

/**
 * The task as the API shows it, if the caller may see it (GET /tasks/{id}): the service's own
 * statement (its visibility rule, project roles included, and its Task JSON built in SQL).
 */
export async function readShownTask(
  db: StackDb,
  config: StackConfig,
  caller: Caller,
  taskId: string,
): Promise<{ version: number } | undefined> {
  const statement: ServiceStatement = config.visibleTaskRead[isAdmin(caller) ? 'all' : 'member'];
  const values = { taskId, userId: caller.userId };
  const { rows } = await db.query<{ task: { version: number } }>(
    statement.text,
    statement.parameters.map((name) => values[name]),
  );
  return rows[0]?.task;
}

export const serializeTask = (t: TaskRow) => ({
  id: t.id,
  ownerId: t.owner_id,
  assigneeId: t.assignee_id,
  projectId: t.project_id,
  title: t.title,
  description: t.description,
  status: t.status,
  priority: t.priority,
  dueAt: t.due_at?.toISOString() ?? null,
  completedAt: t.completed_at?.toISOString() ?? null,
  tags: t.tags,
  attachmentCount: t.attachment_count,
  version: t.version,
  createdAt: t.created_at.toISOString(),
  updatedAt: t.updated_at.toISOString(),
});

const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * Task `t` as the API shows it, built in SQL: a write's one statement puts it in its event and
 * answers it, with no second read. Same keys in the same order as serializeTask.
 */
export const taskJson = (tags: string, attachmentCount: string) => `json_build_object(
  'id', t.id, 'ownerId', t.owner_id, 'assigneeId', t.assignee_id,
  'projectId', t.project_id, 'title', t.title, 'description', t.description,
  'status', t.status, 'priority', t.priority, 'dueAt', ${iso('t.due_at')}, 'completedAt', ${iso('t.completed_at')},
  'tags', ${tags}, 'attachmentCount', ${attachmentCount}, 'version', t.version,
  'createdAt', ${iso('t.created_at')}, 'updatedAt', ${iso('t.updated_at')})`;
