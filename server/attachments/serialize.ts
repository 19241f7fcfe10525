import type { Attachment } from '@task-service/client';
import type { Selection } from 'kysely';
import type { DB } from '../db/query.js';

/** The columns an Attachment is made of (with where its bytes are), for every query that reads one to show it. */
export const attachmentColumns = [
  'attachments.id',
  'attachments.task_id as taskId',
  'attachments.filename',
  'attachments.content_type as contentType',
  'attachments.size',
  'attachments.sha256',
  'attachments.storage_key as storageKey',
  'attachments.uploaded_by as uploadedBy',
  'attachments.created_at as createdAt',
] as const;

/** `size` is a bigint, which pg reads as text. */
export type AttachmentRow = Selection<DB, 'attachments', (typeof attachmentColumns)[number]>;

export function serializeAttachment(row: AttachmentRow): Attachment {
  return {
    id: row.id,
    taskId: row.taskId,
    filename: row.filename,
    contentType: row.contentType,
    size: Number(row.size),
    sha256: row.sha256,
    uploadedBy: row.uploadedBy,
    createdAt: row.createdAt.toISOString(),
  };
}
