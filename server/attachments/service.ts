import { v7 as uuidv7 } from 'uuid';
import { recordingEvents } from '../events/signal.js';
import type { AppContext } from '../context.js';
import { claimQuota } from '../quotas.js';
import type { Prisma } from '../generated/prisma/client.js';
import { attachmentCreated, attachmentDeleted, recordTaskUpdates } from '../events/domain-events.js';
import { AppError, notFound } from '../http/errors.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { taskVisibleTo, visibleTask } from '../tasks/queries.js';
import { findVisibleTaskRef } from '../tasks/service.js';
import { touchTasks } from '../tasks/versions.js';
import { contentTypeOf } from './content-type.js';
import { sanitizeFilename } from './filenames.js';
import type { AttachmentRow } from './serialize.js';
import type { StoredObject } from '../storage/storage.js';
import { discardStoredBytes } from '../storage/stored-bytes.js';

/** An uploaded file part, its bytes already durable in storage. */
export interface ReceivedFile {
  clientFilename: string;
  declaredType: string | undefined;
  stored: StoredObject;
}

type VisibleAttachment = AttachmentRow & { task: { ownerId: string } };

/** An attachment of a task the caller may see, or 404. */
export async function findVisibleAttachment(ctx: AppContext, principal: Principal, attachmentId: string): Promise<VisibleAttachment> {
  const row = await ctx.db.prisma.attachment.findFirst({
    where: { id: attachmentId, task: taskVisibleTo(principal) },
    include: { task: { select: { ownerId: true } } },
  });
  if (!row) throw notFound('attachment');
  return row;
}

/** Oldest first; a task holds at most maxPerTask attachments, so the list needs no pages. */
export async function listAttachments(ctx: AppContext, principal: Principal, taskId: string): Promise<AttachmentRow[]> {
  await findVisibleTaskRef(ctx, principal, taskId);
  return ctx.db.prisma.attachment.findMany({ where: { taskId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
}

async function assertRoomFor(db: Prisma.TransactionClient, taskId: string, maxPerTask: number): Promise<void> {
  const count = await db.attachment.count({ where: { taskId } });
  if (count >= maxPerTask) throw new AppError('conflict', `A task holds at most ${maxPerTask} attachments`);
}

/** Checks made before the body is read, so a doomed upload is not stored first. */
export async function admitUpload(ctx: AppContext, principal: Principal, taskId: string): Promise<void> {
  await findVisibleTaskRef(ctx, principal, taskId);
  await assertRoomFor(ctx.db.prisma, taskId, ctx.config.attachments.maxPerTask);
  await claimQuota(ctx.db.prisma, ctx, principal, 'storageBytes'); // no room left at all: refuse before storing
}

/**
 * Records an upload whose bytes are already durable. The task is locked while its attachments are
 * counted, so concurrent uploads cannot pass the limit; if the row cannot be written the bytes go.
 */
export async function createAttachment(ctx: AppContext, principal: Principal, taskId: string, file: ReceivedFile): Promise<AttachmentRow> {
  try {
    const contentType = await contentTypeOf(file.stored.head, file.declaredType);
    return await recordingEvents(ctx, async (tx) => {
      // Against other writers of the task only: links and other references to it may still be made.
      await tx.$queryRaw`SELECT id FROM tasks WHERE id = ${taskId}::uuid FOR NO KEY UPDATE`;
      const task = await tx.task.findFirst({ where: visibleTask(principal, taskId), select: { id: true, ownerId: true, assigneeId: true } });
      if (!task) throw notFound('task');
      await assertRoomFor(tx, taskId, ctx.config.attachments.maxPerTask);
      await claimQuota(tx, ctx, principal, 'storageBytes', file.stored.size);
      const touched = await touchTasks(tx, { id: taskId }); // its attachmentCount changes
      const attachment = await tx.attachment.create({
        data: {
          id: uuidv7(),
          taskId,
          filename: sanitizeFilename(file.clientFilename),
          contentType,
          size: BigInt(file.stored.size),
          sha256: file.stored.sha256,
          storageKey: file.stored.key,
          uploadedBy: principal.userId,
          createdAt: new Date(),
        },
      });
      await recordTaskUpdates(tx, principal.userId, touched, [attachmentCreated(attachment, task)]);
      return attachment;
    });
  } catch (error) {
    await discardStoredBytes(ctx, [file.stored.key]);
    throw error;
  }
}

/** The task's owner, the uploader or an admin; others who can see the task get 403. Rows first, then bytes. */
export async function deleteAttachment(ctx: AppContext, principal: Principal, attachmentId: string): Promise<void> {
  const row = await findVisibleAttachment(ctx, principal, attachmentId);
  if (!isAdmin(principal) && row.task.ownerId !== principal.userId && row.uploadedBy !== principal.userId) {
    throw new AppError('forbidden', "Only the task's owner, the uploader or an admin may delete an attachment");
  }
  const count = await recordingEvents(ctx, async (tx) => {
    const deleted = await tx.attachment.deleteMany({ where: { id: row.id } });
    if (deleted.count === 0) return 0;
    const touched = await touchTasks(tx, { id: row.taskId }); // its attachmentCount changes
    const task = await tx.task.findUnique({ where: { id: row.taskId }, select: { ownerId: true, assigneeId: true } });
    await recordTaskUpdates(tx, principal.userId, touched, task ? [attachmentDeleted(row, task)] : []);
    return deleted.count;
  });
  if (count > 0) await discardStoredBytes(ctx, [row.storageKey]);
}
