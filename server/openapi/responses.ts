import type { ProblemCode } from '@task-service/client';
import { problemCatalogue } from '@task-service/client';
// Response headers and the problem+json error answers, which the generator does not describe.

const header = (description: string, schema: Record<string, unknown> = { type: 'string', maxLength: 1024 }) => ({ description, schema });

export const headers = {
  'X-Request-Id': header('Echoes a well-formed incoming X-Request-Id (1-128 of A-Z a-z 0-9 . _ : -), else a new UUIDv7', {
    type: 'string',
    pattern: '^[A-Za-z0-9._:-]{1,128}$',
    maxLength: 128,
  }),
  RateLimit: header('What is left of the general request budget (draft-ietf-httpapi-ratelimit-headers), e.g. `"default";r=599;t=60`; sent on operations the limit applies to when it is enabled'),
  'RateLimit-Policy': header('The general request budget, e.g. `"default";q=600;w=60`'),
  'Retry-After': header('Seconds to wait before trying again', { type: 'integer', format: 'int32', minimum: 1, maximum: 86400 }),
  'WWW-Authenticate': header(
    'RFC 6750: `Bearer` when no token was sent; `Bearer error="invalid_token", error_description="…"` when the token sent is expired, invalid or of a session that ended',
  ),
  Location: header('The path of the created resource'),
  'Idempotent-Replayed': header('`true` when this answer is the kept answer to an earlier request with the same `Idempotency-Key`', { type: 'string', enum: ['true'] }),
  ETag: header('The entity tag: `"<version>"` for a task, derived from the sha256 for attachment bytes'),
  Link: header('`<…>; rel="next"` when there is a next page'),
  'Content-Disposition': header('`attachment` with the stored filename (RFC 6266)'),
  'Content-Range': header('The byte range sent, e.g. `bytes 0-99/1234`, or the full length when none can be (`bytes */1234`)'),
};
export type HeaderName = keyof typeof headers;

export const headerRefs = (names: HeaderName[]) =>
  Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));

/** The error answers of API.md's table, by status; each lists the problem codes it may carry. */
const problems: Record<number, { name: string; description: string; example: { code: ProblemCode; detail: string; instance: string } }> = {
  400: { name: 'BadRequest', description: 'The request does not match the contract (`validation_failed`, every issue in `errors`) or the body is not JSON (`malformed_json`)', example: { code: 'validation_failed', detail: "body.title: String must contain at least 1 character(s)", instance: '/tasks' } },
  401: {
    name: 'Unauthenticated',
    description:
      'No token, an expired one (refresh and retry), an invalid one, or one of a session that ended (log in again): `unauthenticated`, the `detail` and `WWW-Authenticate` say which; or a failed login (`invalid_credentials`)',
    example: { code: 'unauthenticated', detail: "The access token has expired; refresh the session (POST /auth/refresh) and retry", instance: '/tasks' },
  },
  403: { name: 'Forbidden', description: 'Authenticated, but the role does not allow the operation (`forbidden`)', example: { code: 'forbidden', detail: "Only the owner or an administrator may delete a task", instance: '/tasks/0193a5c2-7d4e-7b3a-9c1f-2e4d6f8a0b1c' } },
  404: { name: 'NotFound', description: 'No such resource, or not visible to the caller (`not_found`)', example: { code: 'not_found', detail: "No such task", instance: '/tasks/0193a5c2-7d4e-7b3a-9c1f-2e4d6f8a0b1c' } },
  409: { name: 'Conflict', description: 'A uniqueness rule or invariant would break (`email_taken`, `tag_name_taken`, `last_admin`, `conflict`) or a per-user quota is reached (`quota_exceeded`), or a request with the same `Idempotency-Key` is still running (`idempotency_key_in_use`)', example: { code: 'email_taken', detail: "An account with this email already exists", instance: '/auth/register' } },
  410: { name: 'Gone', description: 'A changes-feed cursor or `Last-Event-ID` older than the event retention (`cursor_expired`): do a full sync', example: { code: 'cursor_expired', detail: 'This cursor is older than the event retention (30 days): sync in full, then follow the changes from the new cursor', instance: '/changes' } },
  412: { name: 'PreconditionFailed', description: '`If-Match` does not match the current ETag (`precondition_failed`)', example: { code: 'precondition_failed', detail: "The task has changed since it was read (ETag \"3\"); read it again", instance: '/tasks/0193a5c2-7d4e-7b3a-9c1f-2e4d6f8a0b1c' } },
  413: { name: 'PayloadTooLarge', description: 'A JSON body over 1 MiB or an attachment over the configured limit (`payload_too_large`)', example: { code: 'payload_too_large', detail: "Attachments are limited to 26214400 bytes", instance: '/tasks/0193a5c2-7d4e-7b3a-9c1f-2e4d6f8a0b1c/attachments' } },
  415: { name: 'UnsupportedMediaType', description: 'The body is not in the media type the operation takes (`unsupported_media_type`)', example: { code: 'unsupported_media_type', detail: "Send the body as application/json", instance: '/tasks' } },
  416: { name: 'RangeNotSatisfiable', description: 'The requested byte range lies outside the attachment (`range_not_satisfiable`)', example: { code: 'range_not_satisfiable', detail: "The attachment has 1234 bytes", instance: '/attachments/0193a5c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f/content' } },
  422: { name: 'UnprocessableContent', description: 'An `Idempotency-Key` sent again with a different request (`idempotency_key_reused`)', example: { code: 'idempotency_key_reused', detail: 'This Idempotency-Key was used for a different request', instance: '/tasks' } },
  429: { name: 'TooManyRequests', description: 'Too many requests (`rate_limited`); retry after `Retry-After` seconds', example: { code: 'rate_limited', detail: "At most 600 requests a minute", instance: '/tasks' } },
  500: { name: 'InternalError', description: 'An unexpected error (`internal`); no internals are disclosed', example: { code: 'internal', detail: "An unexpected error occurred", instance: '/tasks' } },
  503: { name: 'Unavailable', description: 'The database is unreachable (`unavailable`); retry after `Retry-After` seconds', example: { code: 'unavailable', detail: "The database is unreachable", instance: '/tasks' } },
};

export const problemResponseRef = (status: number) => {
  const problem = problems[status];
  if (!problem) throw new Error(`No problem response is described for status ${status}`);
  return { $ref: `#/components/responses/${problem.name}` };
};

const isClientError = (status: number) => status >= 400 && status < 500;

export function problemResponses() {
  return Object.fromEntries(
    Object.entries(problems).map(([code, { name, description, example }]) => {
      const status = Number(code);
      const names: HeaderName[] = ['X-Request-Id'];
      if (isClientError(status)) names.push('RateLimit', 'RateLimit-Policy');
      if (status === 401) names.push('WWW-Authenticate');
      if (status === 429 || status === 503) names.push('Retry-After');
      if (status === 416) names.push('Content-Range');
      const { title } = problemCatalogue[example.code];
      const body = { type: `/problems/${example.code}`, title, status, ...example, requestId: '0193a5c2-8f00-7e1d-b2a4-6c3e5f7a9b0d' };
      const errors = example.code === 'validation_failed' ? [{ path: 'body.title', code: 'too_small', message: 'String must contain at least 1 character(s)' }] : undefined;
      const content = { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' }, example: errors ? { ...body, errors } : body } };
      return [name, { description, headers: headerRefs(names), content }];
    }),
  );
}

export const reasonPhrases: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  204: 'No Content',
  206: 'Partial Content',
  304: 'Not Modified',
  503: 'Service Unavailable',
};
