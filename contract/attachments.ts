import { z } from 'zod';
import { c, commonErrors, IdSchema, listOf, ProblemSchema, TimestampSchema } from './common.js';

export const AttachmentSchema = z.object({
  id: IdSchema,
  taskId: IdSchema,
  filename: z.string(),
  contentType: z.string(),
  size: z.number().int(),
  sha256: z.string(),
  uploadedBy: IdSchema,
  createdAt: TimestampSchema,
});
export type Attachment = z.infer<typeof AttachmentSchema>;

const AttachmentParams = z.object({ attach_id: IdSchema });

export const attachmentsContract = c.router(
  {
    upload: {
      method: 'POST',
      path: '/tasks/:task_id/attachments',
      pathParams: z.object({ task_id: IdSchema }),
      contentType: 'multipart/form-data',
      body: z.object({ file: z.custom<Blob>() }),
      responses: { 201: AttachmentSchema, 404: ProblemSchema, 409: ProblemSchema, 413: ProblemSchema },
      summary: 'Upload a file (multipart/form-data, one part named "file")',
    },
    listForTask: {
      method: 'GET',
      path: '/tasks/:task_id/attachments',
      pathParams: z.object({ task_id: IdSchema }),
      responses: { 200: listOf(AttachmentSchema), 404: ProblemSchema },
      summary: "A task's attachments, oldest first",
    },
    get: {
      method: 'GET',
      path: '/attachments/:attach_id',
      pathParams: AttachmentParams,
      responses: { 200: AttachmentSchema, 404: ProblemSchema },
      summary: "An attachment's metadata",
    },
    download: {
      method: 'GET',
      path: '/attachments/:attach_id/content',
      pathParams: AttachmentParams,
      headers: z.object({ range: z.string().optional(), 'if-none-match': z.string().optional() }),
      responses: {
        200: c.otherResponse({ contentType: 'application/octet-stream', body: c.type<Blob>() }),
        206: c.otherResponse({ contentType: 'application/octet-stream', body: c.type<Blob>() }),
        304: c.noBody(),
        404: ProblemSchema,
        416: ProblemSchema,
      },
      summary: "An attachment's bytes (single Range requests answer 206)",
    },
    remove: {
      method: 'DELETE',
      path: '/attachments/:attach_id',
      pathParams: AttachmentParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 403: ProblemSchema, 404: ProblemSchema },
      summary: "Delete an attachment (the task's owner, the uploader or an admin)",
    },
  },
  { commonResponses: commonErrors },
);
