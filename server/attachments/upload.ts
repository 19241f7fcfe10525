import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type multer from 'multer';
import { attachmentsContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { AppError, invalidField, issuesOf, validationFailed } from '../http/errors.js';
import { idempotencyKeys } from '../http/idempotency.js';
import { principalOf } from '../http/principal.js';
import { ObjectTooLargeError, StorageFullError } from '../storage/storage.js';
import { admitUpload, type ReceivedFile } from './service.js';

/** Room for the multipart envelope (boundaries, part headers) around a file of the maximum size. */
const ENVELOPE_ALLOWANCE = 64 * 1024;
const FILE_FIELD = 'file';

/** What is read and dropped of a refused upload before the connection is cut instead. */
const DISCARD_LIMIT = 64 * 1024 * 1024;

const received = new WeakMap<object, ReceivedFile>();

/**
 * Once an upload is refused as too large, what the client still sends is read and dropped, so a
 * client that sends the whole body before it reads the answer (a plain fetch) receives the 413
 * rather than a reset connection; past DISCARD_LIMIT bytes the connection is cut.
 */
const discarding = new WeakSet<object>();
function discardRestOf(req: Request): void {
  if (discarding.has(req)) return;
  discarding.add(req);
  let discarded = 0;
  req.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > DISCARD_LIMIT) req.destroy();
  });
  req.resume();
}

/** The file part the upload middleware stored for this request, if any. */
export const receivedFile = (req: object): ReceivedFile | undefined => received.get(req);

const tooLarge = (maxBytes: number) =>
  new AppError('payload_too_large', `Attachments are limited to ${maxBytes} bytes`);

const filePartProblem = (code: string, message: string) => invalidField(`body.${FILE_FIELD}`, code, message);

/** A multer storage engine that streams the file part straight into attachment storage. */
function attachmentStorageEngine(ctx: AppContext): multer.StorageEngine {
  const { maxBytes } = ctx.config.attachments;
  return {
    _handleFile(req, file, done) {
      // multer drains the rest of the request after this; bound what it reads.
      file.stream.once('limit', () => discardRestOf(req));
      ctx.attachmentStorage.write(file.stream, { maxBytes }).then(
        (stored) => {
          received.set(req, { clientFilename: file.originalname, declaredType: file.mimetype, stored });
          done(null, { size: stored.size });
        },
        (error: unknown) => {
          if (error instanceof ObjectTooLargeError) {
            discardRestOf(req);
            return done(tooLarge(maxBytes));
          }
          // Not the client's fault, and the operators must hear of it.
          if (error instanceof StorageFullError) {
            ctx.logger.error({ err: error }, 'the attachment storage is full: an upload was refused');
            discardRestOf(req);
            return done(
              new AppError('storage_full', 'The attachment storage is full: nothing was stored; retry later'),
            );
          }
          // The part's own stream failing means the request failed; anything else is the storage's fault.
          if (file.stream.errored) return done(error);
          ctx.logger.error({ err: error }, 'could not store an attachment');
          done(new AppError('internal', 'The attachment could not be stored'));
        },
      );
    },
    _removeFile(req, _file, done) {
      const file = received.get(req);
      received.delete(req);
      if (!file) return done(null);
      ctx.attachmentStorage.remove(file.stored.key).then(() => done(null), done);
    },
  };
}

function uploadProblem(
  req: Request,
  error: unknown,
  maxBytes: number,
  MulterError: typeof multer.MulterError,
): AppError {
  if (error instanceof AppError) return error;
  if (error instanceof MulterError) {
    if (error.code === 'LIMIT_FILE_SIZE') return tooLarge(maxBytes);
    return filePartProblem(error.code.toLowerCase(), `Send exactly one part, a file named "${FILE_FIELD}"`);
  }
  // Nobody reads this answer when the client went away; it only names the outcome in the log.
  if (!req.complete || req.destroyed) return new AppError('validation_failed', 'The upload was interrupted');
  return new AppError('validation_failed', 'The multipart body is malformed');
}

/**
 * The upload route's middleware: first the checks that need no body (path, declared size, task
 * visibility, room on the task), then the file part streamed into storage.
 */
export function uploadMiddleware(ctx: AppContext) {
  const { maxBytes } = ctx.config.attachments;
  // multer (with busboy, some twenty modules) is loaded at the first upload, not at start; uploads
  // that come meanwhile wait for the same load.
  let parser: Promise<{ parse: RequestHandler; MulterError: typeof multer.MulterError }> | undefined;
  const loadParser = () =>
    (parser ??= import('multer').then(({ default: multer }) => ({
      parse: multer({
        storage: attachmentStorageEngine(ctx),
        limits: { fileSize: maxBytes, files: 1, parts: 1, headerPairs: 20 },
        // Browsers send non-ASCII file names as raw UTF-8.
        defParamCharset: 'utf8',
      }).single(FILE_FIELD),
      MulterError: multer.MulterError,
    })));

  const admit = (req: Request, res: Response, next: NextFunction): void => {
    const params = attachmentsContract.upload.pathParams.safeParse(req.params);
    if (!params.success) {
      return next(validationFailed(issuesOf('path', params.error)));
    }
    if (Number(req.headers['content-length']) > maxBytes + ENVELOPE_ALLOWANCE) {
      // Answer at once, before the body that will be refused (RFC 9110 §15.5.14), and drop it as it comes.
      discardRestOf(req);
      return next(tooLarge(maxBytes));
    }
    admitUpload(ctx, principalOf(req), params.data.task_id).then(() => next(), next);
  };

  const receive = (req: Request, res: Response, next: NextFunction): void => {
    loadParser().then(({ parse, MulterError }) => {
      parse(req, res, (error?: unknown) => {
        if (error) return next(uploadProblem(req, error, maxBytes, MulterError));
        if (!received.has(req))
          return next(filePartProblem('missing_file', `Send the file as a part named "${FILE_FIELD}"`));
        next();
      });
    }, next);
  };

  // Same upload: the same file name, declared type and bytes (a replay's stored copy is left to the orphan sweep).
  const idempotent = idempotencyKeys(ctx, {
    contentOf: (req) => {
      const file = received.get(req);
      return { name: file?.clientFilename, type: file?.declaredType, sha256: file?.stored.sha256 };
    },
  });
  return [admit, receive, idempotent];
}
