import type { ErrorRequestHandler, RequestHandler } from 'express';
import { RequestValidationError } from '@ts-rest/express';
import type { ZodError } from 'zod';
import type { Problem, ProblemCode, ValidationIssue } from '../../contract/common.js';
import type { Logger } from 'pino';
import { isDatabaseUnreachable } from '../db/errors.js';

const TITLES: Record<ProblemCode, string> = {
  validation_failed: 'Request validation failed',
  malformed_json: 'Malformed JSON body',
  unauthenticated: 'Authentication required',
  invalid_credentials: 'Invalid email or password',
  forbidden: 'Forbidden',
  not_found: 'Not found',
  method_not_allowed: 'Method not allowed',
  email_taken: 'Email already registered',
  tag_name_taken: 'Tag name already in use',
  last_admin: 'Cannot remove the last administrator',
  conflict: 'Conflict',
  idempotency_key_in_use: 'Idempotency key in use',
  cursor_expired: 'Cursor expired',
  precondition_failed: 'Precondition failed',
  payload_too_large: 'Payload too large',
  unsupported_media_type: 'Unsupported media type',
  range_not_satisfiable: 'Range not satisfiable',
  idempotency_key_reused: 'Idempotency key reused',
  rate_limited: 'Too many requests',
  internal: 'Internal server error',
  unavailable: 'Service unavailable',
};

const STATUSES: Record<ProblemCode, number> = {
  validation_failed: 400,
  malformed_json: 400,
  unauthenticated: 401,
  invalid_credentials: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  email_taken: 409,
  tag_name_taken: 409,
  last_admin: 409,
  conflict: 409,
  idempotency_key_in_use: 409,
  cursor_expired: 410,
  precondition_failed: 412,
  payload_too_large: 413,
  unsupported_media_type: 415,
  range_not_satisfiable: 416,
  idempotency_key_reused: 422,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
};

/** The one error type of the service; the error handler turns it into problem+json. */
export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ProblemCode,
    readonly detail?: string,
    readonly options: { headers?: Record<string, string>; errors?: ValidationIssue[] } = {},
  ) {
    super(detail ?? TITLES[code]);
    this.status = STATUSES[code];
  }
}

export const notFound = (what = 'resource') => new AppError('not_found', `No such ${what}`);

/** 401 with the challenge RFC 6750 asks for. */
export const unauthenticated = (detail: string) =>
  new AppError('unauthenticated', detail, { headers: { 'WWW-Authenticate': 'Bearer' } });

export function issuesOf(location: string, error: ZodError): ValidationIssue[] {
  return error.issues.map((issue) => ({
    path: [location, ...issue.path].join('.'),
    code: issue.code,
    message: issue.message,
  }));
}

/** A 400 naming every input at fault, in the form the contract's own validation answers. */
export function validationFailed(errors: ValidationIssue[]): AppError {
  return new AppError('validation_failed', errors.map((e) => `${e.path}: ${e.message}`).join('; '), { errors });
}

/** A 400 for one input, e.g. `invalidField('body.assigneeId', 'unknown_user', 'No user has this id')`. */
export const invalidField = (path: string, code: string, message: string): AppError => validationFailed([{ path, code, message }]);

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
  if (isDatabaseUnreachable(err)) return new AppError('unavailable', 'The database is unreachable', { headers: { 'Retry-After': '5' } });
  return new AppError('internal', 'An unexpected error occurred');
}

export function problemBody(error: AppError, instance: string, requestId: string): Problem {
  return {
    type: `/problems/${error.code}`,
    title: TITLES[error.code],
    status: error.status,
    code: error.code,
    detail: error.detail ?? TITLES[error.code],
    instance,
    requestId,
    ...(error.options.errors ? { errors: error.options.errors } : {}),
  };
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (res.headersSent) return next(err);
    const error = toAppError(err);
    if (error.status >= 500) (req.log ?? logger).error({ err }, 'request failed');
    for (const [name, value] of Object.entries(error.options.headers ?? {})) res.setHeader(name, value);
    res
      .status(error.status)
      .type('application/problem+json')
      .send(JSON.stringify(problemBody(error, req.originalUrl.split('?')[0] ?? req.path, String(req.id))));
  };
}

/** Unknown paths answer 404, known paths with an unknown method 405 with Allow. */
export function unmatchedRoute(allowedMethods: (path: string) => string[]): RequestHandler {
  return (req, _res, next) => {
    const allowed = allowedMethods(req.path);
    if (allowed.length === 0) return next(new AppError('not_found', `No route for ${req.path}`));
    next(new AppError('method_not_allowed', `${req.method} is not allowed here`, { headers: { Allow: allowed.join(', ') } }));
  };
}
