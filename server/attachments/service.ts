import { announceEvents } from '../events/signal.js';
import type { AppContext } from '../context.js';
import { tables } from '../db/query.js';
import { exclusiveClaim, quotaExceeded } from '../quotas.js';
import { AppError, notFound } from '../http/errors.js';
import type { Principal } from '../http/principal.js';
import { taskVisibleTo } from '../tasks/queries.js';
import { findVisibleTaskRef } from '../tasks/service.js';
import { contentTypeOf } from './content-type.js';
import { sanitizeFilename } from './filenames.js';
import { attachmentColumns, type AttachmentRow } from './serialize.js';
import { admission, insertAttachment, removeAttachment, type UploadVerdict } from './store.js';
import type { StoredObject } from '../storage/storage.js';
import { discardStoredBytes } from '../storage/stored-bytes.js';

/** An uploaded file part, its bytes already durable in storage. */
export interface ReceivedFile {
  clientFilename: string;
  declaredType: string | undefined;
  stored: StoredObject;
}

/** An attachment of a task the caller may see, or 404. */
export async function findVisibleAttachment(
  ctx: AppContext,
  principal: Principal,
  attachmentId: string,
): Promise<AttachmentRow> {
  const row = await ctx.db.sql.first(
    tables
      .selectFrom('attachments')
      .innerJoin('tasks', 'tasks.id', 'attachments.task_id')
      .select(attachmentColumns)
      .where('attachments.id', '=', attachmentId)
      .where(taskVisibleTo(principal)),
  );
  if (!row) throw notFound('attachment');
  return row;
}

/** Oldest first; a task holds at most maxPerTask attachments, so the list needs no pages. */
export async function listAttachments(ctx: AppContext, principal: Principal, taskId: string): Promise<AttachmentRow[]> {
  await findVisibleTaskRef(ctx, principal, taskId);
  return ctx.db.sql.all(
    tables
      .selectFrom('attachments')
      .select(attachmentColumns)
      .where('attachments.task_id', '=', taskId)
      .orderBy('attachments.created_at')
      .orderBy('attachments.id'),
  );
}

/** The answer to an upload that failed its checks; `detail` of a full task names the limit. */
function uploadRefusal(ctx: AppContext, verdict: Exclude<UploadVerdict, 'admitted'>): AppError {
  if (verdict === 'no_task') return notFound('task');
  if (verdict === 'read_only')
    return new AppError('forbidden', "Only an editor or admin of the task's project may attach files to it");
  if (verdict === 'full')
    return new AppError('conflict', `A task holds at most ${ctx.config.attachments.maxPerTask} attachments`);
  return quotaExceeded('storageBytes', ctx.config.quotas.storageBytes);
}

/** Checks made before the body is read, so a doomed upload is not stored first (one statement). */
export async function admitUpload(ctx: AppContext, principal: Principal, taskId: string): Promise<void> {
  const verdict = await admission(ctx, principal, taskId, exclusiveClaim(ctx, principal, 'storageBytes'));
  if (verdict !== 'admitted') throw uploadRefusal(ctx, verdict);
}

/**
 * Records an upload whose bytes are already durable, in one round trip (store.ts); if the row
 * cannot be written the bytes go.
 */
export async function createAttachment(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  file: ReceivedFile,
): Promise<AttachmentRow> {
  try {
    const contentType = await contentTypeOf(file.stored.head, file.declaredType);
    const outcome = await insertAttachment(
      ctx,
      principal,
      taskId,
      {
        filename: sanitizeFilename(file.clientFilename),
        contentType,
        size: file.stored.size,
        sha256: file.stored.sha256,
        storageKey: file.stored.key,
      },
      exclusiveClaim(ctx, principal, 'storageBytes'),
    );
    if (outcome.kind !== 'created') throw uploadRefusal(ctx, outcome.kind);
    announceEvents(ctx);
    return outcome.row;
  } catch (error) {
    await discardStoredBytes(ctx, [file.stored.key]);
    throw error;
  }
}

/** The task's owner, the uploader or an admin; others who can see the task get 403. Rows first, then bytes. */
export async function deleteAttachment(ctx: AppContext, principal: Principal, attachmentId: string): Promise<void> {
  const outcome = await removeAttachment(ctx, principal, attachmentId);
  if (outcome.kind === 'not_found') throw notFound('attachment');
  if (outcome.kind === 'forbidden')
    throw new AppError(
      'forbidden',
      "Only the task's owner or the uploader (a personal task), an editor or admin of the task's project, or an admin may delete an attachment",
    );
  announceEvents(ctx);
  await discardStoredBytes(ctx, [outcome.storageKey]);
}
