// The stack baseline's writes, POST /tasks and PATCH /tasks/{id}: each ONE statement (data-modifying
// CTEs) doing what the service's write must: the quota or the visibility and If-Match checks as
// conditions, the task row, its event in the outbox with the task as the API shows it, each active
// webhook's first delivery, and the NOTIFY that wakes the event readers at commit.
import type pg from 'pg';
import { v7 as uuidv7 } from 'uuid';
import { TaskCreateSchema, TaskPatchSchema } from '../../contract/tasks.js';
import type { Caller } from './stack-caller.js';
import type { StackConfig } from './stack-config.js';
import { problem, type Answer } from './stack-http.js';
import {
  attachmentCountOfTask,
  isAdmin,
  readVisibleTask,
  serializeTask,
  TAGS_OF_TASK,
  taskJson,
} from './stack-tasks.js';

/** The service's EVENTS_CHANNEL (server/events/outbox.ts). */
const EVENTS_CHANNEL = 'task_service_events';

/**
 * The rest of a write after a CTE `task` returning (json, owner_id, assignee_id, version): the
 * event of `type` by actor $1, the deliveries, the wake-up; then the task's JSON and version.
 * The event's txid is the column's default (the transaction's id): one statement waits for no lock
 * between taking its id and writing, except an UPDATE queued on the row, which the service orders
 * with a subtransaction.
 */
const recordEvent = (type: 'task.created' | 'task.updated') => `,
  event AS (
    INSERT INTO events (id, type, occurred_at, actor_id, data, audience)
    SELECT $2::uuid, '${type}', statement_timestamp(), $1::uuid, jsonb_build_object('task', task.json),
      ARRAY(SELECT DISTINCT a FROM unnest(ARRAY[task.owner_id, task.assignee_id]) AS a WHERE a IS NOT NULL)
    FROM task
    RETURNING id, type, audience
  ),
  deliveries AS (
    INSERT INTO webhook_deliveries (id, webhook_id, event_id, event_type, attempt, state, next_attempt_at)
    SELECT gen_random_uuid(), w.id, e.id, e.type, 1, 'pending', statement_timestamp()
    FROM event e
    JOIN webhooks w ON w.active AND (e.type = ANY(w.events) OR '*' = ANY(w.events))
    JOIN users u ON u.id = w.owner_id
    WHERE u.role = 'admin' OR w.owner_id = ANY(e.audience)
  ),
  woken AS (SELECT pg_notify('${EVENTS_CHANNEL}', '') FROM event)
  SELECT task.json::text AS json, task.version, (SELECT count(*) FROM woken) AS woken FROM task`;

// A new task has no tags and no attachments yet: nothing to read for them.
const CREATE = `
  WITH task AS (
    INSERT INTO tasks AS t (id, owner_id, title, description, status, priority, due_at, completed_at, version, created_at, updated_at)
    SELECT $3::uuid, $1::uuid, $4, $5, $6::"TaskStatus", $7::"TaskPriority", $8::timestamptz, $9::timestamptz, 1, $10::timestamptz, $10::timestamptz
    WHERE $11::boolean OR (SELECT count(*) FROM tasks WHERE owner_id = $1::uuid) < $12::bigint
    RETURNING t.owner_id, t.assignee_id, t.version, ${taskJson(`'[]'::json`, '0')} AS json
  )${recordEvent('task.created')}`;

// Only the fields sent change (null: unchanged); a write that changes nothing matches no row, like a stale one.
const patchStatement = (config: StackConfig) => `
  WITH task AS (
    UPDATE tasks t SET
      title = coalesce($6, t.title),
      description = coalesce($7, t.description),
      status = coalesce($8::"TaskStatus", t.status),
      priority = coalesce($9::"TaskPriority", t.priority),
      completed_at = CASE WHEN coalesce($8::"TaskStatus", t.status) <> 'done' THEN NULL WHEN t.status = 'done' THEN t.completed_at ELSE $10::timestamptz END,
      version = t.version + 1,
      updated_at = $10::timestamptz
    WHERE t.id = $3::uuid
      AND ($4::boolean OR t.owner_id = $1::uuid OR t.assignee_id = $1::uuid)
      AND ($5::int IS NULL OR t.version = $5::int)
      AND (t.title, t.description, t.status, t.priority)
        IS DISTINCT FROM (coalesce($6, t.title), coalesce($7, t.description), coalesce($8::"TaskStatus", t.status), coalesce($9::"TaskPriority", t.priority))
    RETURNING t.owner_id, t.assignee_id, t.version, ${taskJson(TAGS_OF_TASK, attachmentCountOfTask(config))} AS json
  )${recordEvent('task.updated')}`;

interface Written {
  json: string;
  version: number;
}

/** POST /tasks; the quota is the service's USER_MAX_TASKS (admins are exempt). */
async function createTask(pool: pg.Pool, config: StackConfig, caller: Caller, body: unknown): Promise<Answer> {
  const input = TaskCreateSchema.safeParse(body);
  if (!input.success) return problem(400, 'Bad Request');
  const task = input.data;
  if (task.assigneeId !== null || task.tagIds.length > 0)
    return problem(400, 'The stack baseline creates tasks without assignee or tags');
  const id = uuidv7();
  const now = new Date();
  const { rows } = await pool.query<Written>(CREATE, [
    caller.userId,
    uuidv7(),
    id,
    task.title,
    task.description,
    task.status,
    task.priority,
    task.dueAt,
    task.status === 'done' ? now : null,
    now,
    isAdmin(caller),
    config.maxTasksPerUser,
  ]);
  const written = rows[0];
  if (!written) return problem(409, 'Quota "tasks" reached');
  return { status: 201, body: written.json, headers: { location: `/tasks/${id}`, etag: `"${written.version}"` } };
}

/** The version an If-Match header asks for: null for none or `*`, and 0 (no task's) for any other tag. */
function matchedVersion(ifMatch: string | undefined): number | null {
  if (ifMatch === undefined || ifMatch.trim() === '*') return null;
  const version = /^\s*"(\d+)"\s*$/.exec(ifMatch)?.[1];
  return version === undefined ? 0 : Number(version);
}

/** PATCH /tasks/{id} of title, description, status or priority, with or without If-Match. */
async function patchTask(
  pool: pg.Pool,
  config: StackConfig,
  patch: string,
  caller: Caller,
  taskId: string,
  ifMatch: string | undefined,
  body: unknown,
): Promise<Answer> {
  const input = TaskPatchSchema.safeParse(body);
  if (!input.success) return problem(400, 'Bad Request');
  const change = input.data;
  if (change.assigneeId !== undefined || change.dueAt !== undefined)
    return problem(400, 'The stack baseline changes no assignee or due date');
  const version = matchedVersion(ifMatch);
  const { rows } = await pool.query<Written>(patch, [
    caller.userId,
    uuidv7(),
    taskId,
    isAdmin(caller),
    version,
    change.title ?? null,
    change.description ?? null,
    change.status ?? null,
    change.priority ?? null,
    new Date(),
  ]);
  const written = rows[0];
  if (written) return { status: 200, body: written.json, headers: { etag: `"${written.version}"` } };
  // No row changed: the task is not visible, or stale, or the change was no change (the version stays).
  const current = await readVisibleTask(pool, config, caller, taskId);
  if (!current) return problem(404, 'Not Found');
  const etag = `"${current.version}"`;
  if (version !== null && version !== current.version) return problem(412, 'Precondition Failed', { etag });
  return { status: 200, body: JSON.stringify(serializeTask(current)), headers: { etag } };
}

export function taskWrites(pool: pg.Pool, config: StackConfig) {
  const patch = patchStatement(config);
  return {
    create: (caller: Caller, body: unknown) => createTask(pool, config, caller, body),
    patch: (caller: Caller, taskId: string, ifMatch: string | undefined, body: unknown) =>
      patchTask(pool, config, patch, caller, taskId, ifMatch, body),
  };
}
