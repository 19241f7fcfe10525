import type { Attachment } from '@task-service/client';
import type { Attachment as AttachmentRow } from '../generated/prisma/client.js';

export type { AttachmentRow };

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
