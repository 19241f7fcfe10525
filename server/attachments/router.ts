import { Readable } from 'node:stream';
import type { Response } from 'express';
import { initServer } from '@ts-rest/express';
import { attachmentsContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { AppError, notFound } from '../http/errors.js';
import { principalOf } from '../http/principal.js';
import { entityTag, noneMatchHits } from '../http/etags.js';
import { rangeOf } from './download.js';
import { contentDisposition } from './filenames.js';
import { serializeAttachment } from './serialize.js';
import { createAttachment, deleteAttachment, findVisibleAttachment, listAttachments } from './service.js';
import { receivedFile, uploadMiddleware } from './upload.js';

/** ts-rest pipes a returned stream without watching it: a read error or a client leaving must end both sides. */
function streamedTo(res: Response, bytes: Readable, ctx: AppContext): Readable {
  bytes.on('error', (error) => {
    ctx.logger.error({ err: error }, 'reading attachment bytes failed');
    res.destroy(error);
  });
  // A client gone before the bytes were opened closed its response already: let the file go now.
  if (res.closed) bytes.destroy();
  else res.on('close', () => bytes.destroy());
  return bytes;
}

export function attachmentsRouter(ctx: AppContext) {
  return initServer().router(attachmentsContract, {
    upload: {
      middleware: uploadMiddleware(ctx),
      handler: async ({ params, req, res }) => {
        const file = receivedFile(req);
        if (!file) throw new AppError('internal', 'The upload middleware did not run');
        const row = await createAttachment(ctx, principalOf(req), params.task_id, file);
        res.setHeader('Location', `/attachments/${row.id}`);
        return { status: 201, body: serializeAttachment(row) };
      },
    },

    listForTask: async ({ params, req }) => ({
      status: 200,
      body: { items: (await listAttachments(ctx, principalOf(req), params.task_id)).map(serializeAttachment) },
    }),

    get: async ({ params, req }) => ({
      status: 200,
      body: serializeAttachment(await findVisibleAttachment(ctx, principalOf(req), params.attach_id)),
    }),

    download: async ({ params, headers, req, res }) => {
      const row = await findVisibleAttachment(ctx, principalOf(req), params.attach_id);
      const size = Number(row.size);
      const etag = entityTag(row.sha256);
      res.setHeader('ETag', etag);
      res.setHeader('Accept-Ranges', 'bytes');
      if (noneMatchHits(headers['if-none-match'], etag)) return { status: 304, body: undefined };

      const decision = rangeOf(headers, size, etag);
      if (decision.kind === 'unsatisfiable') {
        throw new AppError('range_not_satisfiable', `The content is ${size} bytes long`, {
          headers: { 'Content-Range': `bytes */${size}` },
        });
      }
      const range = decision.kind === 'partial' ? decision.range : undefined;
      // HEAD answers the same headers from the row alone: the bytes are not read at all.
      const bytes = req.method === 'HEAD' ? Readable.from([]) : await ctx.attachmentStorage.open(row.storageKey, range);
      if (!bytes) throw notFound('attachment'); // deleted since the row was read
      res.setHeader('Content-Type', row.contentType);
      // Served as a download of inert content, whatever type it claims.
      res.setHeader('Content-Security-Policy', "default-src 'none'; sandbox");
      res.setHeader('Content-Disposition', contentDisposition(row.filename));
      if (!range) {
        res.setHeader('Content-Length', String(size));
        return { status: 200, body: streamedTo(res, bytes, ctx) };
      }
      res.setHeader('Content-Range', `bytes ${range.start}-${range.end}/${size}`);
      res.setHeader('Content-Length', String(range.end - range.start + 1));
      return { status: 206, body: streamedTo(res, bytes, ctx) };
    },

    remove: async ({ params, req }) => {
      await deleteAttachment(ctx, principalOf(req), params.attach_id);
      return { status: 204, body: undefined };
    },
  });
}
