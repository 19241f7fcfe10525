// The attachments' writes, each one pipelined transaction (SqlDatabase.pipeline) as the tasks' are
// (server/tasks/store.ts): the task's row locked first, then one statement that decides every check
// on it and writes, and the events settled in the same round trip. The bytes are stored before
// (upload.ts) and removed after (service.ts).
import { v7 as uuidv7 } from 'uuid';
import type { AppContext } from '../context.js';
import { rowsOf } from '../db/sql.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { claimBounds, claimLock, hasRoom, type QuotaClaim } from '../quotas.js';
import { audience, iso, settleTaskEvents, touchTaskOf, visibleTo } from '../tasks/store.js';
import type { AttachmentRow } from './serialize.js';

/** The contract's Attachment of the row `a` as jsonb, for its events (serializeAttachment's shape). */
const attachmentJson = (a: string) => `jsonb_build_object(
    'id', ${a}.id, 'taskId', ${a}.task_id, 'filename', ${a}.filename, 'contentType', ${a}.content_type, 'size', ${a}.size,
    'sha256', ${a}.sha256, 'uploadedBy', ${a}.uploaded_by, 'createdAt', ${iso(`${a}.created_at`)})`;

const ATTACHMENT_ROW = `
  SELECT a.id, a.task_id AS "taskId", a.filename, a.content_type AS "contentType", a.size::text AS size, a.sha256,
    a.storage_key AS "storageKey", a.uploaded_by AS "uploadedBy", a.created_at AS "createdAt"
  FROM attachments a`;

/**
 * The upload's checks in order, the first that fails deciding, as SQL on the task ($1) for the
 * caller ($2): the task is visible, it holds fewer than `$3` attachments, and the caller's storage
 * leaves room for `$4` more bytes within `$5` (null: exempt).
 */
const uploadVerdict = (principal: Principal) => `CASE
    WHEN ${visibleTo(principal, 'cur', '$2')} IS NOT TRUE THEN 'no_task'
    WHEN (SELECT count(*) FROM attachments WHERE task_id = cur.id) >= $3 THEN 'full'
    WHEN NOT ${hasRoom('storageBytes', '$2', '$4', '$5')} THEN 'no_room'
    ELSE 'admitted' END`;

export type UploadVerdict = 'no_task' | 'full' | 'no_room' | 'admitted';

/** The upload's checks before its body is read (one statement): a byte more must fit the caller's storage quota. */
export async function admission(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  claim: QuotaClaim,
): Promise<UploadVerdict> {
  const { room, limit } = claimBounds(claim, 1n);
  const [row] = await ctx.db.sql.rows<{ verdict: UploadVerdict }>(
    `SELECT ${uploadVerdict(principal)} AS verdict FROM tasks cur WHERE cur.id = $1`,
    [taskId, principal.userId, ctx.config.attachments.maxPerTask, room, limit],
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
  const lock = claimLock(claim, principal.userId);
  const { room, limit } = claimBounds(claim, BigInt(file.size));
  const results = await ctx.db.sql.pipelineList([
    // Against other writers of the task only: links and other references to it may still be made.
    { text: 'SELECT 1 FROM tasks WHERE id = $1 FOR NO KEY UPDATE', values: [taskId] },
    ...lock,
    { text: 'SAVEPOINT write' },
    {
      text: `
        WITH verdict AS (SELECT cur.id, ${uploadVerdict(principal)} AS outcome FROM tasks cur WHERE cur.id = $1),
        added AS (
          INSERT INTO attachments (id, task_id, filename, content_type, size, sha256, storage_key, uploaded_by, created_at)
          SELECT $6, v.id, $7, $8, $14, $9, $10, $2, $11 FROM verdict v WHERE v.outcome = 'admitted'
          RETURNING *
        ),
        ${touchTaskOf('added', {
          actor: '$2',
          now: '$11',
          eventId: '$12',
          also: `SELECT $13::uuid AS id, 'attachment.created' AS type, jsonb_build_object('attachment', ${attachmentJson('a')}) AS data,
                        ${audience('t')} AS audience, $2::uuid AS actor_id, 0 AS n
                 FROM added a, touched t`,
        })}
        SELECT outcome FROM verdict`,
      values: [
        taskId,
        principal.userId,
        ctx.config.attachments.maxPerTask,
        room,
        limit,
        id,
        file.filename,
        file.contentType,
        file.sha256,
        file.storageKey,
        new Date(),
        uuidv7(),
        uuidv7(),
        file.size,
      ],
    },
    ...settleTaskEvents,
    { text: `${ATTACHMENT_ROW} WHERE a.id = $1`, values: [id] },
  ]);
  const [verdict] = rowsOf<{ outcome: UploadVerdict }>(results[lock.length + 2]);
  const [row] = rowsOf<AttachmentRow>(results[results.length - 1]);
  if (!verdict) return { kind: 'no_task' };
  if (verdict.outcome !== 'admitted') return { kind: verdict.outcome };
  if (!row) return { kind: 'no_task' };
  return { kind: 'created', row };
}

export type RemoveOutcome = { kind: 'not_found' } | { kind: 'forbidden' } | { kind: 'deleted'; storageKey: string };

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
  const mayDelete = isAdmin(principal) ? 'true' : '(t.owner_id = $2 OR a.uploaded_by = $2)';
  const results = await ctx.db.sql.pipelineList([
    {
      text: 'SELECT 1 FROM tasks WHERE id = (SELECT task_id FROM attachments WHERE id = $1) FOR NO KEY UPDATE',
      values: [attachmentId],
    },
    { text: 'SAVEPOINT write' },
    {
      text: `
        WITH verdict AS (
          SELECT a.id, a.storage_key, CASE
              WHEN ${visibleTo(principal, 't', '$2')} IS NOT TRUE THEN 'not_found'
              WHEN ${mayDelete} IS NOT TRUE THEN 'forbidden'
              ELSE 'apply' END AS outcome
          FROM attachments a JOIN tasks t ON t.id = a.task_id WHERE a.id = $1
        ),
        removed AS (DELETE FROM attachments a USING verdict v WHERE a.id = v.id AND v.outcome = 'apply' RETURNING a.id, a.task_id),
        ${touchTaskOf('removed', {
          actor: '$2',
          now: '$3',
          eventId: '$4',
          also: `SELECT $5::uuid AS id, 'attachment.deleted' AS type, jsonb_build_object('attachmentId', r.id, 'taskId', r.task_id) AS data,
                        ${audience('t')} AS audience, $2::uuid AS actor_id, 0 AS n
                 FROM removed r, touched t`,
        })}
        SELECT outcome, storage_key FROM verdict`,
      values: [attachmentId, principal.userId, new Date(), uuidv7(), uuidv7()],
    },
    ...settleTaskEvents,
  ]);
  const [verdict] = rowsOf<{ outcome: 'not_found' | 'forbidden' | 'apply'; storage_key: string }>(results[2]);
  if (!verdict || verdict.outcome === 'not_found') return { kind: 'not_found' };
  if (verdict.outcome === 'forbidden') return { kind: 'forbidden' };
  return { kind: 'deleted', storageKey: verdict.storage_key };
}
