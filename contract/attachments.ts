import { z } from 'zod';
import { c, commonErrors, IdSchema, listOf, ProblemSchema, TimestampSchema, type Named } from './common.js';
import { needs } from './scopes.js';

const attachmentSchema = z.object({
  id: IdSchema.describe("The attachment's id (UUIDv7)"),
  taskId: IdSchema.describe('The task it is attached to'),
  filename: z
    .string()
    .min(1)
    .describe("The uploaded file's name sanitised: no path, no control characters, 1 to 255 bytes of UTF-8"),
  contentType: z
    .string()
    .describe(
      'Detected from the bytes where recognisable, else the type declared for the part, else `application/octet-stream`',
    ),
  size: z.number().int().nonnegative().describe('The size of the content in bytes'),
  sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .describe('Hex SHA-256 of the content; the download\'s ETag is `"<sha256>"`'),
  uploadedBy: IdSchema.describe('The user who uploaded it'),
  createdAt: TimestampSchema.describe('When it was uploaded'),
});
export interface Attachment extends z.output<typeof attachmentSchema> {}
export const AttachmentSchema: Named<Attachment> = attachmentSchema;

export const TaskAttachmentsParams = z.object({
  task_id: IdSchema.describe(
    "A task you own or are assigned, or one of your projects' tasks (any for an administrator); another is 404",
  ),
});
const AttachmentParams = z.object({
  attach_id: IdSchema.describe('An attachment of a task you can see (any for an administrator); another is 404'),
});

/** Attachment bytes: the server streams them, a client receives a Blob. */
const BytesSchema = z.unknown().pipe(z.instanceof(Blob));

export const attachmentsContract = c.router(
  {
    upload: {
      method: 'POST',
      metadata: needs('tasks:write'),
      path: '/tasks/:task_id/attachments',
      pathParams: TaskAttachmentsParams,
      contentType: 'multipart/form-data',
      body: z.object({ file: z.custom<Blob>() }),
      responses: {
        201: AttachmentSchema,
        404: ProblemSchema,
        409: ProblemSchema,
        413: ProblemSchema,
        507: ProblemSchema,
      },
      summary: 'Upload a file (multipart/form-data, exactly one part, a file named "file")',
      description:
        'Anyone who can see the task may upload. The size limit is ATTACHMENT_MAX_BYTES (413, at once when Content-Length ' +
        'already exceeds it) and a task holds at most ATTACHMENTS_MAX_PER_TASK attachments (409 conflict). ' +
        'The bytes are durable before the 201 is sent. Location names the new attachment. A full disk is 507 `storage_full` (nothing is kept).',
    },
    listForTask: {
      method: 'GET',
      metadata: needs('tasks:read'),
      path: '/tasks/:task_id/attachments',
      pathParams: TaskAttachmentsParams,
      responses: { 200: listOf(AttachmentSchema), 404: ProblemSchema },
      summary: "A task's attachments, oldest first",
      description:
        'The attachments of a task the caller can see, oldest first (at most ATTACHMENTS_MAX_PER_TASK, so not paginated).',
    },
    get: {
      method: 'GET',
      metadata: needs('tasks:read'),
      path: '/attachments/:attach_id',
      pathParams: AttachmentParams,
      responses: { 200: AttachmentSchema, 404: ProblemSchema },
      summary: "An attachment's metadata",
      description: "An attachment's metadata: name, media type, size and SHA-256 of its bytes.",
    },
    download: {
      method: 'GET',
      metadata: needs('tasks:read'),
      path: '/attachments/:attach_id/content',
      pathParams: AttachmentParams,
      headers: z.object({
        range: z
          .string()
          .max(200)
          .optional()
          .describe(
            'One byte range, e.g. `bytes=0-1023` or `bytes=-500` (the last 500): 206 with that part; one starting past the end is 416. Several ranges get the whole content',
          ),
        'if-range': z
          .string()
          .max(200)
          .optional()
          .describe(
            'The ETag you hold (`"<sha256>"`): the range is honoured only if it still matches, else the whole content is sent',
          ),
        'if-none-match': z
          .string()
          .max(1000)
          .optional()
          .describe('The ETag of your copy (`"<sha256>"`): 304 with no body when it matches'),
      }),
      responses: {
        200: c.otherResponse({ contentType: 'application/octet-stream', body: BytesSchema }),
        206: c.otherResponse({ contentType: 'application/octet-stream', body: BytesSchema }),
        304: c.noBody(),
        404: ProblemSchema,
        416: ProblemSchema,
      },
      summary: "An attachment's bytes",
      description:
        'Sent with its own Content-Type, Content-Disposition: attachment (RFC 6266, with an ASCII fallback and a UTF-8 ' +
        'filename*), ETag "<sha256>" (If-None-Match answers 304) and X-Content-Type-Options: nosniff. One `bytes=` range ' +
        'answers 206 with Content-Range; a range past the end 416 with `Content-Range: bytes */<size>`; several ranges, ' +
        'or an If-Range that does not match, the whole content. `HEAD` answers the same status and headers (Content-Length, ' +
        'ETag, Accept-Ranges) without the bytes, e.g. to learn the size before a ranged download.',
    },
    remove: {
      method: 'DELETE',
      metadata: needs('tasks:write'),
      path: '/attachments/:attach_id',
      pathParams: AttachmentParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 403: ProblemSchema, 404: ProblemSchema },
      summary: "Delete an attachment (the task's owner, the uploader or an admin; others who can see it get 403)",
      description:
        "Deletes the attachment and its bytes; the task's attachmentCount and version change. The task's owner, the uploader or an administrator; others who can see it get 403.",
    },
  },
  { commonResponses: commonErrors },
);
