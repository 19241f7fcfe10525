// The attachments' writes, each one pipelined transaction (SqlDatabase.pipeline) as the tasks' are
// (server/tasks/store.ts): the task's row locked first, then one statement that decides every check
// on it and writes, and the events settled in the same round trip. The bytes are stored before
// (upload.ts) and removed after (service.ts).
import { expressionBuilder, sql, type RawBuilder } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { AppContext } from '../context.js';
import { rawQuery, tables, type DB } from '../db/query.js';
import type { Statement } from '../db/sql.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { claimBounds, claimLock, holdsRoom, type ClaimBounds, type QuotaClaim } from '../quotas.js';
import { visibleHere, visibleTasks, writableHere } from '../tasks/queries.js';
import { audience, iso, settleTaskEvents, touchTaskOf } from '../tasks/change-events.js';
import { attachmentColumns, type AttachmentRow } from './serialize.js';

/** Opens the subtransaction whose id places the write's events (settleTaskEvents ends it). */
const BEGIN_WRITE: Statement = { text: 'SAVEPOINT write' };

/** The contract's Attachment of the row `a` as jsonb, for its events (serializeAttachment's shape). */
const attachmentJson = (a: string) => `jsonb_build_object(
    'id', ${a}.id, 'taskId', ${a}.task_id, 'filename', ${a}.filename, 'contentType', ${a}.content_type, 'size', ${a}.size,
    'sha256', ${a}.sha256, 'uploadedBy', ${a}.uploaded_by, 'createdAt', ${iso(`${a}.created_at`)})`;

/** Locks the task's row against its other writers only: links and other references to it may still be made. */
const lockTask = (taskId: string) => tables.selectFrom('tasks').select('id').where('id', '=', taskId).forNoKeyUpdate();

/**
 * The values touchTaskOf writes with, and the id of the attachment's own event, as a CTE `args`
 * (touchTaskOf takes SQL expressions, not values).
 */
const touchArgs = (actorId: string, now: Date) =>
  sql`args AS (SELECT ${actorId}::uuid AS actor_id, ${now}::timestamptz AS written_at, ${uuidv7()}::uuid AS event_id,
                      ${uuidv7()}::uuid AS attachment_event_id)`;

const FROM_ARGS = {
  actor: '(SELECT actor_id FROM args)',
  now: '(SELECT written_at FROM args)',
  eventId: '(SELECT event_id FROM args)',
};

/**
 * The upload's checks in order, the first that fails deciding, as SQL on the row of `tasks` in
 * scope: the caller sees the task, it holds fewer than `maxPerTask` attachments, and the caller's
 * storage leaves room within `bounds`.
 */
const uploadVerdict = (principal: Principal, maxPerTask: number, bounds: ClaimBounds): RawBuilder<UploadVerdict> =>
  sql<UploadVerdict>`CASE
    WHEN (${visibleHere(visibleTasks(principal))}) IS NOT TRUE THEN 'no_task'
    WHEN (${writableHere(visibleTasks(principal))}) IS NOT TRUE THEN 'read_only'
    WHEN (SELECT count(*) FROM attachments WHERE attachments.task_id = tasks.id) >= ${maxPerTask} THEN 'full'
    WHEN NOT ${holdsRoom('storageBytes', principal.userId, bounds)} THEN 'no_room'
    ELSE 'admitted' END`;

export type UploadVerdict = 'no_task' | 'read_only' | 'full' | 'no_room' | 'admitted';

/** The upload's checks before its body is read (one statement): a byte more must fit the caller's storage quota. */
export async function admission(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  claim: QuotaClaim,
): Promise<UploadVerdict> {
  const verdict = uploadVerdict(principal, ctx.config.attachments.maxPerTask, claimBounds(claim, 1n));
  const row = await ctx.db.sql.first(
    rawQuery(sql<{ verdict: UploadVerdict }>`SELECT ${verdict} AS verdict FROM tasks WHERE tasks.id = ${taskId}`),
  );
  return row?.verdict ?? 'no_task';
}

export interface NewAttachment {
  filename: string;
  contentType: string;
  size: number;
  sha256: string;
  storageKey: string;
}

export type UploadOutcome = { kind: Exclude<UploadVerdict, 'admitted'> } | { kind: 'created'; row: AttachmentRow };

/**
 * Records an upload whose bytes are stored, with the task's row locked (so concurrent uploads cannot
 * pass the per-task limit) and then the claim's on the uploader's: the row, the task's new version
 * (its attachmentCount changes), `attachment.created` and `task.updated`, in one round trip.
 */
export async function insertAttachment(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  file: NewAttachment,
  claim: QuotaClaim,
): Promise<UploadOutcome> {
  const id = uuidv7();
  const me = principal.userId;
  const verdict = uploadVerdict(principal, ctx.config.attachments.maxPerTask, claimBounds(claim, BigInt(file.size)));
  const { checks, created } = await ctx.db.sql.pipeline({
    lock: [lockTask(taskId), ...claimLock(claim, me)],
    begin: BEGIN_WRITE,
    checks: rawQuery(sql<{ outcome: UploadVerdict }>`
      WITH ${touchArgs(me, new Date())},
      verdict AS (SELECT tasks.id, ${verdict} AS outcome FROM tasks WHERE tasks.id = ${taskId}),
      added AS (
        INSERT INTO attachments (id, task_id, filename, content_type, size, sha256, storage_key, uploaded_by, created_at)
        SELECT ${id}, v.id, ${file.filename}, ${file.contentType}, ${file.size}, ${file.sha256}, ${file.storageKey}, args.actor_id,
               args.written_at
        FROM verdict v, args WHERE v.outcome = 'admitted'
        RETURNING *
      ),
      ${sql.raw(
        touchTaskOf('added', {
          ...FROM_ARGS,
          also: `SELECT args.attachment_event_id AS id, 'attachment.created' AS type,
                        jsonb_build_object('attachment', ${attachmentJson('a')}) AS data,
                        ${audience('t')} AS audience, args.actor_id AS actor_id, 0 AS n
                 FROM added a, touched t, args`,
        }),
      )}
      SELECT outcome FROM verdict`),
    settle: settleTaskEvents,
    created: tables.selectFrom('attachments').select(attachmentColumns).where('attachments.id', '=', id),
  });
  const [outcome, row] = [checks[0]?.outcome, created[0]];
  if (outcome === undefined) return { kind: 'no_task' };
  if (outcome !== 'admitted') return { kind: outcome };
  if (!row) return { kind: 'no_task' };
  return { kind: 'created', row };
}

export type RemoveOutcome = { kind: 'not_found' } | { kind: 'forbidden' } | { kind: 'deleted'; storageKey: string };

/**
 * Who may delete the attachment in scope, on the task in scope: an admin; on a personal task its
 * owner or the uploader; on a project's task an editor or admin of the project.
 */
const mayDelete = (principal: Principal) => {
  const eb = expressionBuilder<DB, 'tasks' | 'attachments'>();
  return isAdmin(principal)
    ? eb.lit(true)
    : eb.or([
        eb.and([
          eb('tasks.project_id', 'is', null),
          eb.or([eb('tasks.owner_id', '=', principal.userId), eb('attachments.uploaded_by', '=', principal.userId)]),
        ]),
        eb.and([eb('tasks.project_id', 'is not', null), writableHere(visibleTasks(principal))]),
      ]);
};

/**
 * Deletes the row (the task's owner, the uploader or an admin) with its task's row locked: the
 * task's new version, `attachment.deleted` and `task.updated`, in one round trip. The bytes are the
 * caller's to remove once this committed.
 */
export async function removeAttachment(
  ctx: AppContext,
  principal: Principal,
  attachmentId: string,
): Promise<RemoveOutcome> {
  const taskOf = tables
    .selectFrom('attachments')
    .select('attachments.task_id')
    .where('attachments.id', '=', attachmentId);
  const { checks } = await ctx.db.sql.pipeline({
    lock: tables.selectFrom('tasks').select('tasks.id').where('tasks.id', '=', taskOf).forNoKeyUpdate(),
    begin: BEGIN_WRITE,
    checks: rawQuery(sql<{ outcome: 'not_found' | 'forbidden' | 'apply'; storageKey: string }>`
      WITH ${touchArgs(principal.userId, new Date())},
      verdict AS (
        SELECT attachments.id, attachments.storage_key, CASE
            WHEN (${visibleHere(visibleTasks(principal))}) IS NOT TRUE THEN 'not_found'
            WHEN (${mayDelete(principal)}) IS NOT TRUE THEN 'forbidden'
            ELSE 'apply' END AS outcome
        FROM attachments JOIN tasks ON tasks.id = attachments.task_id WHERE attachments.id = ${attachmentId}
      ),
      removed AS (DELETE FROM attachments a USING verdict v WHERE a.id = v.id AND v.outcome = 'apply' RETURNING a.id, a.task_id),
      ${sql.raw(
        touchTaskOf('removed', {
          ...FROM_ARGS,
          also: `SELECT args.attachment_event_id AS id, 'attachment.deleted' AS type,
                        jsonb_build_object('attachmentId', r.id, 'taskId', r.task_id) AS data,
                        ${audience('t')} AS audience, args.actor_id AS actor_id, 0 AS n
                 FROM removed r, touched t, args`,
        }),
      )}
      SELECT outcome, storage_key AS "storageKey" FROM verdict`),
    settle: settleTaskEvents,
  });
  const [outcome] = checks;
  if (!outcome || outcome.outcome === 'not_found') return { kind: 'not_found' };
  if (outcome.outcome === 'forbidden') return { kind: 'forbidden' };
  return { kind: 'deleted', storageKey: outcome.storageKey };
}
