// Response headers and the problem+json error answers, which the generator does not describe.
import { problemCatalogue, ProblemCodeSchema, type Problem } from '@task-service/client';
import { problemBody, problemExamples } from './examples.js';

const header = (description: string, schema: Record<string, unknown> = { type: 'string', maxLength: 1024 }) => ({
  description,
  schema,
});

export const headers = {
  'X-Request-Id': header(
    'Echoes a well-formed incoming X-Request-Id (1-128 of A-Z a-z 0-9 . _ : -), else a new UUIDv7',
    {
      type: 'string',
      pattern: '^[A-Za-z0-9._:-]{1,128}$',
      maxLength: 128,
    },
  ),
  RateLimit: header(
    'What is left of the general request budget (draft-ietf-httpapi-ratelimit-headers), e.g. `"default";r=599;t=60`; sent on operations the limit applies to when it is enabled',
  ),
  'RateLimit-Policy': header('The general request budget, e.g. `"default";q=600;w=60`'),
  'Retry-After': header('Seconds to wait before trying again', {
    type: 'integer',
    format: 'int32',
    minimum: 1,
    maximum: 86400,
  }),
  'WWW-Authenticate': header(
    'RFC 6750: `Bearer` when no token was sent; `Bearer error="invalid_token", error_description="…"` when the token sent is expired, invalid or of a session that ended',
  ),
  Location: header('The path of the created resource'),
  'Idempotent-Replayed': header(
    '`true` when this answer is the kept answer to an earlier request with the same `Idempotency-Key`',
    { type: 'string', enum: ['true'] },
  ),
  ETag: header('The entity tag: `"<version>"` for a task, derived from the sha256 for attachment bytes'),
  Link: header('`<…>; rel="next"` when there is a next page'),
  'Content-Disposition': header('`attachment` with the stored filename (RFC 6266)'),
  'Content-Range': header(
    'The byte range sent, e.g. `bytes 0-99/1234`, or the full length when none can be (`bytes */1234`)',
  ),
};
export type HeaderName = keyof typeof headers;

export const headerRefs = (names: HeaderName[]) =>
  Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]));

/** The error answers (docs/api-guide.md, errors), by status; each lists the problem codes it may carry. */
const problems: Record<number, { name: string; description: string }> = {
  400: {
    name: 'BadRequest',
    description:
      'The request does not match the contract (`validation_failed`, every issue in `errors`) or the body is not JSON (`malformed_json`)',
  },
  401: {
    name: 'Unauthenticated',
    description:
      'No token, an expired one (refresh and retry), an invalid one, or one of a session that ended (log in again): `unauthenticated`, the `detail` and `WWW-Authenticate` say which; or a failed login (`invalid_credentials`)',
  },
  403: {
    name: 'Forbidden',
    description:
      'Authenticated, but the role does not allow the operation (`forbidden`), or a personal access token lacks the scope it needs (`insufficient_scope`, with `WWW-Authenticate: Bearer error="insufficient_scope", scope="…"`)',
  },
  404: { name: 'NotFound', description: 'No such resource, or not visible to the caller (`not_found`)' },
  409: {
    name: 'Conflict',
    description:
      'A uniqueness rule or invariant would break (`email_taken`, `tag_name_taken`, `last_admin`, `conflict`) or a per-user quota is reached (`quota_exceeded`), or a request with the same `Idempotency-Key` is still running (`idempotency_key_in_use`)',
  },
  410: {
    name: 'Gone',
    description:
      'A changes-feed cursor or `Last-Event-ID` older than the event retention (`cursor_expired`): do a full sync',
  },
  412: {
    name: 'PreconditionFailed',
    description: '`If-Match` does not match the current ETag (`precondition_failed`)',
  },
  413: {
    name: 'PayloadTooLarge',
    description: 'A JSON body over 1 MiB or an attachment over the configured limit (`payload_too_large`)',
  },
  415: {
    name: 'UnsupportedMediaType',
    description: 'The body is not in the media type the operation takes (`unsupported_media_type`)',
  },
  416: {
    name: 'RangeNotSatisfiable',
    description: 'The requested byte range lies outside the attachment (`range_not_satisfiable`)',
  },
  422: {
    name: 'UnprocessableContent',
    description: 'An `Idempotency-Key` sent again with a different request (`idempotency_key_reused`)',
  },
  429: {
    name: 'TooManyRequests',
    description: 'Too many requests (`rate_limited`); retry after `Retry-After` seconds',
  },
  500: { name: 'InternalError', description: 'An unexpected error (`internal`); no internals are disclosed' },
  503: {
    name: 'Unavailable',
    description: 'The database is unreachable (`unavailable`); retry after `Retry-After` seconds',
  },
  507: {
    name: 'InsufficientStorage',
    description: "The service's attachment storage is full (`storage_full`); nothing was stored",
  },
};

const problemOf = (status: number) => {
  const problem = problems[status];
  if (!problem) throw new Error(`No problem response is described for status ${status}`);
  return problem;
};

export const problemResponseRef = (status: number) => ({ $ref: `#/components/responses/${problemOf(status).name}` });

const isClientError = (status: number) => status >= 400 && status < 500;

/** An error answer with its headers and one example per body (named by its code). */
export function problemResponse(status: number, bodies: Problem[]) {
  // X-Request-Id and RateLimit-Policy are on every answer, described once in the introduction.
  const names: HeaderName[] = [];
  if (isClientError(status)) names.push('RateLimit');
  if (status === 401 || status === 403) names.push('WWW-Authenticate');
  if (status === 429 || status === 503) names.push('Retry-After');
  if (status === 412) names.push('ETag');
  if (status === 416) names.push('Content-Range');
  const examples = Object.fromEntries(
    bodies.map((body) => [body.code, { summary: problemCatalogue[body.code].title, value: body }]),
  );
  return {
    description: problemOf(status).description,
    headers: headerRefs(names),
    content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' }, examples } },
  };
}

/** The shared error answers, each with an example of every code its status may carry. */
export function problemResponses() {
  return Object.fromEntries(
    Object.entries(problems).map(([code, { name }]) => {
      const status = Number(code);
      const bodies = ProblemCodeSchema.options
        .filter((problem) => problemCatalogue[problem].status === status)
        .map((problem) => problemBody(problemExamples[problem], problemExamples[problem].path));
      return [name, problemResponse(status, bodies)];
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
