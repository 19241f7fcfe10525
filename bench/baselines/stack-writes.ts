// The stack baseline's writes, POST /tasks and PATCH /tasks/{id}: each one transaction sent in one
// round trip doing what the service's does (server/tasks/store.ts, server/quotas.ts), no more:
//
// - the lock the service takes first: the user's row shared (the quota claim far from its limit),
//   or the task's row FOR NO KEY UPDATE;
// - a subtransaction (SAVEPOINT) in which ONE statement of data-modifying CTEs makes the checks as
//   conditions (the quota from the user's holdings counters, not a COUNT of their tasks; who may
//   change the task, project roles included; If-Match), writes the task, its event with the task as
//   the API shows it (the service's own Task JSON) and, for a change, the fields it changed with
//   their values before (`previous`), the task's activity entry, and each receiving webhook's
//   first delivery, and returns the task's JSON, which is the answer;
// - the event placed at the subtransaction's id (as the service places events, server/events/outbox.ts);
// then, after the commit, one coalesced NOTIFY for the event readers.
import { v7 as uuidv7 } from 'uuid';
import { TaskCreateSchema, TaskPatchSchema } from '../../contract/tasks.js';
import type { Caller } from './stack-caller.js';
import type { StackConfig } from './stack-config.js';
import { commitAnnouncer, type StackDb, type Statement } from './stack-db.js';
import { problem, type Answer } from './stack-http.js';
import { isAdmin, readVisibleTask, serializeTask } from './stack-tasks.js';

/** The service's EVENTS_CHANNEL (server/events/outbox.ts). */
const EVENTS_CHANNEL = 'task_service_events';

/** The fields a creation's activity entry shows when set (server/events/activity.ts). */
const CREATED_FIELDS = `ARRAY['title', 'description', 'status', 'priority', 'assigneeId', 'dueAt', 'projectId', 'parentId', 'tags']`;

/**
 * The rest of a write's statement after a CTE `task` returning (json, owner_id, assignee_id,
 * project_id, version) and a CTE `changes` (the activity entry's changes, jsonb, and the event's
 * data): the event of `type` by actor $1 with id $2, the task's activity entry, the deliveries;
 * then the task's JSON and version.
 */
const recordEvent = (type: 'task.created' | 'task.updated') => `,
  event AS (
    INSERT INTO events (id, type, occurred_at, actor_id, data, audience, project_id)
    SELECT $2::uuid, '${type}', statement_timestamp(), $1::uuid, changes.data,
      CASE WHEN task.project_id IS NULL
        THEN array_remove(ARRAY[task.owner_id, NULLIF(task.assignee_id, task.owner_id)], NULL) ELSE ARRAY[]::uuid[] END,
      task.project_id
    FROM task, changes
    RETURNING id, type, audience, project_id, occurred_at
  ),
  activity AS (
    INSERT INTO task_activity (task_id, at, id, actor_id, type, changes)
    SELECT $3::uuid, e.occurred_at, e.id, $1::uuid, e.type, changes.entry
    FROM event e, changes WHERE changes.entry <> '[]'::jsonb
  ),
  deliveries AS (
    INSERT INTO webhook_deliveries (id, webhook_id, event_id, event_type, attempt, state, next_attempt_at)
    SELECT gen_random_uuid(), w.id, e.id, e.type, 1, 'pending', statement_timestamp()
    FROM event e
    JOIN webhooks w ON w.active AND (e.type = ANY(w.events) OR '*' = ANY(w.events))
    JOIN users u ON u.id = w.owner_id
    WHERE u.role = 'admin' OR w.owner_id = ANY(e.audience)
      OR EXISTS (SELECT 1 FROM project_members pm WHERE pm.project_id = e.project_id AND pm.user_id = w.owner_id)
  )
  SELECT task.json::text AS json, task.version FROM task`;

// The subtransaction's full id: its 32 bits (the event row's xmin) in the transaction's epoch.
const PLACE_EVENT = `UPDATE events SET txid = ((pg_current_xact_id()::text::bigint >> 32) << 32) + xmin::text::bigint
   + CASE WHEN xmin::text::bigint < (pg_current_xact_id()::text::bigint & 4294967295) THEN 4294967296 ELSE 0 END
  WHERE id = $1`;

// The quota: the user's holdings (kept by the triggers on tasks) leave room for $12 more, within $13.
const createStatement = (config: StackConfig) => `
  WITH task AS (
    INSERT INTO tasks AS t (id, owner_id, title, description, status, priority, due_at, completed_at, version, created_at, updated_at)
    SELECT $3::uuid, $1::uuid, $4, $5, $6::"TaskStatus", $7::"TaskPriority", $8::timestamptz, $9::timestamptz, 1, $10::timestamptz, $10::timestamptz
    WHERE $11::boolean OR (SELECT coalesce(sum(tasks), 0) FROM user_holdings WHERE user_id = $1::uuid) + $12::bigint <= $13::bigint
    RETURNING t.owner_id, t.assignee_id, t.project_id, t.version, ${config.taskJson} AS json
  ),
  changes AS (
    SELECT jsonb_build_object('task', task.json) AS data,
      (SELECT coalesce(jsonb_agg(jsonb_build_object('field', f.key, 'from', NULL, 'to', task.json::jsonb -> f.key) ORDER BY f.n), '[]'::jsonb)
       FROM unnest(${CREATED_FIELDS}::text[]) WITH ORDINALITY AS f(key, n)
       WHERE task.json::jsonb -> f.key NOT IN ('null'::jsonb, '""'::jsonb, '[]'::jsonb)) AS entry
    FROM task
  )${recordEvent('task.created')}`;

// Only the fields sent change (null: unchanged); a write that changes nothing matches no row, like a
// stale one. Who may change it: an admin, the owner or assignee of a personal task, an editor or
// admin of its project. `previous`: the fields of the task before that differ after.
const patchStatement = (config: StackConfig) => `
  WITH before AS (
    SELECT ${config.taskJson}::jsonb AS json FROM tasks t WHERE t.id = $3::uuid
  ),
  task AS (
    UPDATE tasks t SET
      title = coalesce($6, t.title),
      description = coalesce($7, t.description),
      status = coalesce($8::"TaskStatus", t.status),
      priority = coalesce($9::"TaskPriority", t.priority),
      completed_at = CASE WHEN coalesce($8::"TaskStatus", t.status) <> 'done' THEN NULL WHEN t.status = 'done' THEN t.completed_at ELSE $10::timestamptz END,
      version = t.version + 1,
      updated_at = $10::timestamptz
    WHERE t.id = $3::uuid
      AND ($4::boolean OR (t.project_id IS NULL AND (t.owner_id = $1::uuid OR t.assignee_id = $1::uuid))
        OR EXISTS (SELECT 1 FROM project_members pm WHERE pm.project_id = t.project_id AND pm.user_id = $1::uuid AND pm.role IN ('editor', 'admin')))
      AND ($5::int IS NULL OR t.version = $5::int)
      AND (t.title, t.description, t.status, t.priority)
        IS DISTINCT FROM (coalesce($6, t.title), coalesce($7, t.description), coalesce($8::"TaskStatus", t.status), coalesce($9::"TaskPriority", t.priority))
    RETURNING t.owner_id, t.assignee_id, t.project_id, t.version, ${config.taskJson} AS json
  ),
  previous AS (
    SELECT coalesce(jsonb_object_agg(was.key, was.value), '{}'::jsonb) AS fields
    FROM before, task, jsonb_each(before.json) AS was
    WHERE was.key NOT IN ('version', 'updatedAt') AND was.value IS DISTINCT FROM task.json::jsonb -> was.key
  ),
  changes AS (
    SELECT jsonb_build_object('task', task.json, 'previous', previous.fields) AS data,
      (SELECT coalesce(jsonb_agg(jsonb_build_object('field', p.key, 'from', p.value, 'to', task.json::jsonb -> p.key) ORDER BY p.key), '[]'::jsonb)
       FROM jsonb_each(previous.fields) AS p) AS entry
    FROM task, previous
  )${recordEvent('task.updated')}`;

interface Written {
  json: string;
  version: number;
}

/** The transaction of a write: `lock`, then `write` (parameters $1 actor, $2 event id) and the event's placing in a subtransaction. */
async function written(db: StackDb, lock: Statement[], write: string, values: unknown[]) {
  const results = await db.pipeline([
    ...lock,
    { text: 'SAVEPOINT write' },
    { text: write, values },
    { text: PLACE_EVENT, values: [values[1]] },
    { text: 'RELEASE SAVEPOINT write' },
  ]);
  const row = results[lock.length + 1]?.[0];
  return row && typeof row.json === 'string' && typeof row.version === 'number'
    ? ({ json: row.json, version: row.version } satisfies Written)
    : undefined;
}

/** The version an If-Match header asks for: null for none or `*`, and 0 (no task's) for any other tag. */
function matchedVersion(ifMatch: string | undefined): number | null {
  if (ifMatch === undefined || ifMatch.trim() === '*') return null;
  const version = /^\s*"(\d+)"\s*$/.exec(ifMatch)?.[1];
  return version === undefined ? 0 : Number(version);
}

export async function taskWrites(db: StackDb, config: StackConfig) {
  const create = createStatement(config);
  const patch = patchStatement(config);
  const announce = commitAnnouncer(db, EVENTS_CHANNEL);
  // The service's shared claim leaves room for every transaction the server may run at once.
  const { rows } = await db.query<{ max_connections: string }>('SHOW max_connections');
  const room = String(rows[0]?.max_connections ?? 0);

  /** POST /tasks; the quota is the service's USER_MAX_TASKS (admins are exempt). */
  const created = async (caller: Caller, body: unknown): Promise<Answer> => {
    const input = TaskCreateSchema.safeParse(body);
    if (!input.success) return problem(400, 'Bad Request');
    const task = input.data;
    if (task.assigneeId !== null || task.tagIds.length > 0)
      return problem(400, 'The stack baseline creates tasks without assignee or tags');
    const id = uuidv7();
    const now = new Date();
    const exempt = isAdmin(caller);
    const lock = exempt ? [] : [{ text: 'SELECT 1 FROM users WHERE id = $1 FOR SHARE', values: [caller.userId] }];
    const row = await written(db, lock, create, [
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
      exempt,
      room,
      config.maxTasksPerUser,
    ]);
    if (!row) return problem(409, 'Quota "tasks" reached');
    announce();
    return { status: 201, body: row.json, headers: { location: `/tasks/${id}`, etag: `"${row.version}"` } };
  };

  /** PATCH /tasks/{id} of title, description, status or priority, with or without If-Match. */
  const change = async (
    caller: Caller,
    taskId: string,
    ifMatch: string | undefined,
    body: unknown,
  ): Promise<Answer> => {
    const input = TaskPatchSchema.safeParse(body);
    if (!input.success) return problem(400, 'Bad Request');
    const fields = input.data;
    if (fields.assigneeId !== undefined || fields.dueAt !== undefined)
      return problem(400, 'The stack baseline changes no assignee or due date');
    const version = matchedVersion(ifMatch);
    const lock = [{ text: 'SELECT 1 FROM tasks WHERE id = $1 FOR NO KEY UPDATE', values: [taskId] }];
    const row = await written(db, lock, patch, [
      caller.userId,
      uuidv7(),
      taskId,
      isAdmin(caller),
      version,
      fields.title ?? null,
      fields.description ?? null,
      fields.status ?? null,
      fields.priority ?? null,
      new Date(),
    ]);
    if (row) {
      announce();
      return { status: 200, body: row.json, headers: { etag: `"${row.version}"` } };
    }
    // No row changed: the task is not visible, or stale, or the change was no change (the version stays).
    const current = await readVisibleTask(db, config, caller, taskId);
    if (!current) return problem(404, 'Not Found');
    const etag = `"${current.version}"`;
    if (version !== null && version !== current.version) return problem(412, 'Precondition Failed', { etag });
    return { status: 200, body: JSON.stringify(serializeTask(current)), headers: { etag } };
  };

  return { create: created, patch: change };
}
