import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { RequestValidationError } from '@ts-rest/express';
import type { ZodError } from 'zod';
import type { Problem, ProblemCode, ValidationIssue } from '@task-service/client';
import { problemCatalogue } from '@task-service/client';
import { isDatabaseUnreachable, isStatementTimeout } from '../db/errors.js';

/** The one error type of the service; the error handler turns it into problem+json. */
export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ProblemCode,
    readonly detail?: string,
    readonly options: { headers?: Record<string, string>; errors?: ValidationIssue[] } = {},
  ) {
    super(detail ?? problemCatalogue[code].title);
    this.status = problemCatalogue[code].status;
  }
}

export const notFound = (what = 'resource') => new AppError('not_found', `No such ${what}`);

/** 401 with the challenge RFC 6750 asks for when no token was sent. */
export const unauthenticated = (detail: string) =>
  new AppError('unauthenticated', detail, { headers: { 'WWW-Authenticate': 'Bearer' } });

/** 401 for a bearer token that was sent and refused: RFC 6750 §3.1 `invalid_token`, with the reason. */
export const invalidToken = (detail: string) =>
  new AppError('unauthenticated', detail, {
    // RFC 6750 allows no `"` or `\\` in a description; the service's details are plain ASCII sentences.
    headers: { 'WWW-Authenticate': `Bearer error="invalid_token", error_description="${detail}"` },
  });

export function issuesOf(location: string, error: ZodError): ValidationIssue[] {
  return error.issues.map((issue) => ({
    path: [location, ...issue.path].join('.'),
    code: issue.code,
    message: issue.message,
  }));
}

/** A 400 naming every input at fault, in the form the contract's own validation answers. */
export function validationFailed(errors: ValidationIssue[]): AppError {
  const detail = errors
    .slice(0, MAX_ISSUES)
    .map((e) => `${clipped(e.path, MAX_TEXT.path)}: ${clipped(e.message, MAX_TEXT.message)}`)
    .join('; ');
  return new AppError('validation_failed', detail, { errors });
}

/** A 400 for one input, e.g. `invalidField('body.assigneeId', 'unknown_user', 'No user has this id')`. */
export const invalidField = (path: string, code: string, message: string): AppError =>
  validationFailed([{ path, code, message }]);

function validationError(err: RequestValidationError): AppError {
  return validationFailed([
    ...(err.pathParams ? issuesOf('path', err.pathParams) : []),
    ...(err.headers ? issuesOf('header', err.headers) : []),
    ...(err.query ? issuesOf('query', err.query) : []),
    ...(err.body ? issuesOf('body', err.body) : []),
  ]);
}

interface BodyParserError extends Error {
  type: string;
  status?: number;
}
const isBodyParserError = (err: unknown): err is BodyParserError =>
  err instanceof Error && 'type' in err && typeof err.type === 'string';

const clientErrorStatus = (err: unknown): boolean => {
  const status = err instanceof Error && 'status' in err ? err.status : undefined;
  return typeof status === 'number' && status >= 400 && status < 500;
};

/** Maps whatever was thrown to the AppError the client sees. */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof RequestValidationError) return validationError(err);
  if (isBodyParserError(err)) {
    if (err.type === 'entity.parse.failed') return new AppError('malformed_json', 'The body is not valid JSON');
    if (err.type === 'entity.too.large') return new AppError('payload_too_large', 'JSON bodies are limited to 1 MiB');
    if (err.type === 'encoding.unsupported' || err.type === 'charset.unsupported')
      return new AppError('unsupported_media_type', 'Only UTF-8 JSON bodies are accepted');
  }
  // Any other error marked as the client's (a malformed %-escape in the path, an unreadable body).
  if (clientErrorStatus(err)) return new AppError('validation_failed', 'The request could not be read');
  if (isDatabaseUnreachable(err))
    return new AppError('unavailable', 'The database is unreachable', { headers: { 'Retry-After': '5' } });
  if (isStatementTimeout(err))
    return new AppError('unavailable', 'The database is too busy to answer in time', {
      headers: { 'Retry-After': '2' },
    });
  return new AppError('internal', 'An unexpected error occurred');
}

/** An error answer stays small whatever the input: at most this many issues, this many bytes. */
const MAX_ISSUES = 20;
export const MAX_PROBLEM_BYTES = 16 * 1024;
const MAX_TEXT = { detail: 2000, instance: 1000, path: 200, code: 64, message: 300 };

/** `text` cut to `max` characters (never inside a surrogate pair), marked with an ellipsis when cut. */
function clipped(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = /[\uD800-\uDBFF]/.test(text.charAt(max - 2)) ? max - 2 : max - 1;
  return `${text.slice(0, cut)}…`;
}

const clippedIssue = (issue: ValidationIssue): ValidationIssue => ({
  path: clipped(issue.path, MAX_TEXT.path),
  code: clipped(issue.code, MAX_TEXT.code),
  message: clipped(issue.message, MAX_TEXT.message),
});

/**
 * The problem+json body: at most 20 issues (then `truncated: true`), every text clipped, and
 * issues dropped until the whole fits in 16 KiB, so a huge bad input never makes a huge answer.
 */
export function problemBody(error: AppError, instance: string, requestId: string): Problem {
  const all = error.options.errors;
  const errors = all?.slice(0, MAX_ISSUES).map(clippedIssue);
  const body = (listed: ValidationIssue[] | undefined): Problem => ({
    type: `/problems/${error.code}`,
    title: problemCatalogue[error.code].title,
    status: error.status,
    code: error.code,
    detail: clipped(error.detail ?? problemCatalogue[error.code].title, MAX_TEXT.detail),
    instance: clipped(instance, MAX_TEXT.instance),
    requestId,
    ...(listed ? { errors: listed } : {}),
    ...(all && listed && listed.length < all.length ? { truncated: true as const } : {}),
  });
  let problem = body(errors);
  while (
    problem.errors &&
    problem.errors.length > 1 &&
    Buffer.byteLength(JSON.stringify(problem)) > MAX_PROBLEM_BYTES
  ) {
    problem = body(problem.errors.slice(0, -1));
  }
  return problem;
}

/**
 * Where a client learns how to get a token for a request's path (RFC 9728's protected-resource
 * metadata URL), named in the Bearer challenge of every 401 and insufficient_scope 403; undefined
 * when the service issues no tokens to apps.
 */
export type ResourceMetadataOf = (path: string) => string | undefined;

/** `error`'s Bearer challenge with `resource_metadata` added (RFC 9728 §5.1). */
function withResourceMetadata(error: AppError, path: string, resourceMetadataOf: ResourceMetadataOf): AppError {
  const challenge = error.options.headers?.['WWW-Authenticate'];
  const url = resourceMetadataOf(path);
  if (url === undefined || challenge === undefined || !/^Bearer\b/.test(challenge)) return error;
  const parameter = `resource_metadata="${url}"`;
  const header = challenge === 'Bearer' ? `Bearer ${parameter}` : `${challenge}, ${parameter}`;
  return new AppError(error.code, error.detail, {
    ...error.options,
    headers: { ...error.options.headers, 'WWW-Authenticate': header },
  });
}

export function errorHandler(resourceMetadataOf: ResourceMetadataOf = () => undefined): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (res.headersSent) return next(err);
    const error = withResourceMetadata(toAppError(err), req.path, resourceMetadataOf);
    // The request log's line carries it (with the stack and the request id): one line per failure.
    if (error.status >= 500) res.err = err instanceof Error ? err : new Error(String(err));
    res.send(problemAnswer(req, res, error));
  };
}

/** Sets a problem's status, headers and media type on `res`; returns its body. */
export function problemAnswer(req: Request, res: Response, error: AppError): string {
  for (const [name, value] of Object.entries(error.options.headers ?? {})) res.setHeader(name, value);
  res.status(error.status).type('application/problem+json');
  return JSON.stringify(problemBody(error, req.originalUrl.split('?')[0] ?? req.path, String(req.id)));
}

/** Unknown paths answer 404, known paths with an unknown method 405 with Allow. */
export function unmatchedRoute(allowedMethods: (path: string) => string[]): RequestHandler {
  return (req, _res, next) => {
    const allowed = allowedMethods(req.path);
    if (allowed.length === 0) return next(new AppError('not_found', `No route for ${req.path}`));
    next(
      new AppError('method_not_allowed', `${req.method} is not allowed here`, {
        headers: { Allow: allowed.join(', ') },
      }),
    );
  };
}
