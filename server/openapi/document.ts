import { isAppRouteNoBody, isAppRouteOtherResponse, type AppRoute, type AppRouteResponse } from '@ts-rest/core';
import { generateOpenApi } from '@ts-rest/open-api';
import { z } from 'zod';
import {
  contract,
  OpenApiDocumentSchema,
  type OpenApiDocument as ServedDocument,
  isLoginOnly,
  isPublicRoute,
  ProblemSchema,
  scopeOf,
  scopeDescriptions,
  SCOPES,
  TaskSchema,
  type Problem,
} from '@task-service/client';
import { packageVersion } from '../project-root.js';
import { isCreatingPost } from '../http/idempotency.js';
import { codeSamples, SAMPLE_BASE_URL, SAMPLE_VARIABLES, samplesMarkdown } from './code-samples.js';
import {
  examplesByRoute,
  problemBody,
  problemExamples,
  type AnyOperationExamples,
  type ProblemExample,
} from './examples.js';
import {
  headerRefs,
  headers,
  problemResponse,
  problemResponseRef,
  problemResponses,
  reasonPhrases,
  type HeaderName,
} from './responses.js';
import {
  schemaOf,
  withAnyValueSchemas,
  withIntegerFormats,
  withNamedModels,
  type JsonSchema,
  type OpenApiDocument,
} from './schemas.js';

type OperationMapper = NonNullable<NonNullable<Parameters<typeof generateOpenApi>[2]>['operationMapper']>;
type Operation = Parameters<OperationMapper>[0];
type Parameter = NonNullable<Operation['parameters']>[number];

const INTRODUCTION = [
  'Users, their tasks, tags and attachments. JSON in and out with camelCase fields; ids are UUIDv7; timestamps are RFC 3339 in UTC with milliseconds. Every answer carries `X-Request-Id`. A typed TypeScript client is the package `@task-service/client`; `npx task-service-verify --base-url URL` runs its contract tests against a service.',
  '## Authentication and refresh\n\n`POST /auth/register` or `POST /auth/login` answer `{ user, accessToken, refreshToken, expiresIn }`. Send `Authorization: Bearer <accessToken>` on every other call. The access token lasts `expiresIn` seconds (15 minutes by default); when a call answers 401 with `WWW-Authenticate: Bearer error="invalid_token", error_description="The access token has expired…"`, call `POST /auth/refresh` with the refresh token **once** (share one refresh between concurrent calls), keep the new pair (the old refresh token is spent: presenting it again ends the session) and retry. A 401 saying the session has ended means: log in again. `POST /auth/logout` ends the session everywhere.',
  `## Personal access tokens and scopes\n\nScripts, integrations and agents use a personal access token (\`tsk_pat_…\`, from \`POST /tokens\` with a login's access token) as \`Authorization: Bearer tsk_pat_…\`. Each operation names the scope a token needs (\`x-scopes\`, shown under the operation); a token without it gets 403 \`insufficient_scope\` with \`WWW-Authenticate: Bearer error="insufficient_scope", scope="…"\`. A \`write\` scope includes its \`read\`. An access token from a login carries every scope of its user. The Model Context Protocol endpoint \`POST /mcp\` serves the same operations as tools, filtered by the token's scopes.\n\n${SCOPES.map((scope) => `- \`${scope}\`: ${scopeDescriptions[scope]}`).join('\n')}`,
  `## OAuth for MCP clients and apps\n\nApps (the MCP clients of Claude, ChatGPT, VS Code, \`mcp-remote\`) connect through OAuth 2.1 (the \`oauth2\` scheme below): they find the authorization server from \`/.well-known/oauth-protected-resource\` (or \`…/mcp\`, named in every 401's \`WWW-Authenticate\`), register at \`POST /oauth/register\`, send the user to \`/oauth/authorize\` to sign in and approve the scopes (the same as a personal access token's), and exchange the code at \`POST /oauth/token\` (PKCE S256, rotating refresh tokens). A token asked for \`<PUBLIC_URL>/mcp\` works on \`/mcp\` only. Users see and disconnect their apps with \`GET /oauth/grants\` and \`DELETE /oauth/grants/{grant_id}\`. See docs/mcp.md.`,
  '## Pagination\n\nLists answer `{ items, nextCursor }` and a `Link: <…>; rel="next"` header. Pass `nextCursor` back as `cursor` with the same filters and `sort` until it is `null`. `limit` is 1-100 (default 20). Cursors are opaque keyset positions: pages neither skip nor repeat items when others insert or delete meanwhile. Filters with several values take a comma list (`status=todo,in_progress`) or the parameter repeated.',
  '## ETags and concurrent changes\n\nA task carries `version` and `ETag: "<version>"`. Send `If-Match: "<version>"` with `PUT`, `PATCH` and `DELETE`: when someone changed the task since you read it, the answer is 412 `precondition_failed` and nothing changes; read it again, reapply your change and retry. `GET` with `If-None-Match` answers 304 when your copy is current.',
  '## Attachments\n\nUpload with `POST /tasks/{task_id}/attachments` as `multipart/form-data` with one file part named `file` (at most ATTACHMENT_MAX_BYTES, 413 beyond). Download the bytes from `GET /attachments/{attach_id}/content`: `Range: bytes=…` answers 206, and its ETag is the SHA-256 of the bytes.',
  '## Headers on every answer\n\nEvery answer carries `X-Request-Id` (it echoes a well-formed incoming one, 1-128 of `A-Z a-z 0-9 . _ : -`, else it is a new UUIDv7: quote it when reporting a problem). Where the general request rate limit applies, answers carry `RateLimit` (what is left, e.g. `"default";r=599;t=60`) and `RateLimit-Policy` (the budget, e.g. `"default";q=600;w=60`). Each operation lists only the headers particular to its answers.',
  `## The samples\n\nEach operation shows a \`curl\` command and a typed-client call for the service serving this page. The commands read the access token from \`$TOKEN\` and ids from shell variables named after them (${Object.values(
    SAMPLE_VARIABLES,
  )
    .map((name) => `\`$${name}\``)
    .join(', ')}): set them from earlier answers, e.g. \`TASK_ID=<the id POST /tasks answered>\`.`,
  '## Errors\n\nEvery 4xx and 5xx answer is RFC 9457 problem details (`application/problem+json`) with a stable `code`; `type` is `/problems/<code>`, a page saying what the code means and what to do (the whole catalogue: [/problems](/problems)). Validation errors list every issue in `errors`. 429 and 503 carry `Retry-After`: wait that long, then retry calls that are safe to repeat.',
].join('\n\n');

const bearerAuth = {
  type: 'http',
  scheme: 'bearer',
  bearerFormat: 'JWT',
  description:
    'A personal access token (`tsk_pat_…`, limited to the scopes each operation names in `x-scopes`), or an access token from `POST /auth/register`, `/auth/login` or `/auth/refresh`: a JWT signed with EdDSA whose algorithm, issuer, audience and type (`at+jwt`) are pinned on verification, following RFC8725. It expires after 15 minutes by default; the public keys are at `/.well-known/jwks.json`.',
};

const tags = [
  { name: 'auth', description: 'Accounts and sessions: register, log in, refresh, log out' },
  { name: 'users', description: 'User accounts (self or admin)' },
  { name: 'projects', description: 'Projects shared by a team: their members and roles' },
  { name: 'tasks', description: "Tasks the caller owns or is assigned to, or their projects' (admin: all)" },
  { name: 'relations', description: 'How tasks relate: one blocks, relates to or duplicates another' },
  { name: 'tags', description: "The caller's tags, and tags on tasks" },
  { name: 'attachments', description: 'Files attached to tasks' },
  { name: 'comments', description: 'Comments on tasks, in Markdown' },
  { name: 'activity', description: "A task's history: every change since its creation" },
  {
    name: 'webhooks',
    description: 'Signed deliveries of events to your URLs (Standard Webhooks), with a delivery log',
  },
  {
    name: 'personalAccessTokens',
    description: 'Personal access tokens for scripts, integrations and agents, each limited to its scopes',
  },
  {
    name: 'oauthGrants',
    description: 'The apps (MCP clients in chat apps and others) a user connected with OAuth, and disconnecting them',
  },
  { name: 'events', description: 'Every change as an event: the changes feed (delta sync) and the live stream (SSE)' },
  { name: 'service', description: 'Health, readiness and the keys that verify access tokens' },
  { name: 'docs', description: 'This document and its reference page' },
];

/** `a,b,c` query values: a ZodPipeline from a string to an array, which the generator leaves blank. */
function commaListOf(
  schema: z.ZodTypeAny | undefined,
): { item: z.ZodTypeAny; maxItems: number | undefined } | undefined {
  let inner = schema;
  while (inner instanceof z.ZodOptional || inner instanceof z.ZodDefault) inner = inner._def.innerType;
  if (!(inner instanceof z.ZodPipeline)) return undefined;
  // The array may be wrapped in the check of its length before its items (boundedArray).
  const out: unknown = inner._def.out instanceof z.ZodEffects ? inner._def.out.innerType() : inner._def.out;
  if (!(out instanceof z.ZodArray)) return undefined;
  return { item: out.element, maxItems: out._def.maxLength?.value };
}

/** The generator puts a header's `.describe()` text in its schema, where the reference page does not show it. */
function withDescriptionLifted(parameter: Parameter): Parameter {
  if (!('in' in parameter) || parameter.description !== undefined || !parameter.schema || '$ref' in parameter.schema)
    return parameter;
  const { description, ...schema } = parameter.schema;
  return description === undefined ? parameter : { ...parameter, description, schema };
}

function describeParameter(generated: Parameter, route: AppRoute): Parameter {
  const parameter = withDescriptionLifted(generated);
  if (!('in' in parameter) || parameter.in !== 'query' || !(route.query instanceof z.ZodObject)) return parameter;
  const list = commaListOf(route.query.shape[parameter.name]);
  if (!list) return parameter;
  return {
    ...parameter,
    description: [parameter.description, 'Several values: comma-separated, or the parameter repeated.']
      .filter(Boolean)
      .join('. '),
    style: 'form',
    explode: false,
    schema: { type: 'array', items: schemaOf(list.item, 'request'), maxItems: list.maxItems },
  };
}

const GeneratedFormSchema = z.object({ properties: z.record(z.record(z.unknown())).default({}) });

const fileSchema: JsonSchema = {
  type: 'string',
  format: 'binary',
  description:
    'The file: at most ATTACHMENT_MAX_BYTES (25 MiB by default, 413 beyond); its name and type are taken from the part',
};

function describeRequestBody(route: AppRoute, body: NonNullable<Operation['requestBody']>): Operation['requestBody'] {
  if (!('content' in body)) return body;
  if ('contentType' in route && route.contentType === 'multipart/form-data') {
    const properties = GeneratedFormSchema.parse(body.content['multipart/form-data']?.schema).properties;
    // Parts the generator could not type (z.custom<Blob>) are the file parts.
    const files = Object.entries(properties)
      .filter(([, schema]) => !('type' in schema))
      .map(([name]) => name);
    const form: JsonSchema = {
      type: 'object',
      required: files,
      additionalProperties: false,
      properties: { ...properties, ...Object.fromEntries(files.map((name) => [name, fileSchema])) },
    };
    return { required: true, content: { 'multipart/form-data': { schema: form } } };
  }
  const generated = body.content['application/json'];
  if (!generated) return body;
  const json = { ...generated, example: examplesOf(route).request };
  // Express parses both as JSON; PATCH is a merge patch (RFC 7396).
  return {
    required: true,
    content:
      route.method === 'PATCH'
        ? { 'application/json': json, 'application/merge-patch+json': json }
        : { 'application/json': json },
  };
}

function successHeaders(status: number, declared: AppRouteResponse): HeaderName[] {
  // X-Request-Id and RateLimit-Policy are on every answer, described once in the introduction.
  const names: HeaderName[] = [];
  if (status < 300) names.push('RateLimit');
  if (status === 201) names.push('Location');
  if (status === 201 || status === 202) names.push('Idempotent-Replayed');
  if (declared === TaskSchema || status === 304) names.push('ETag');
  if (declared instanceof z.ZodObject && 'nextCursor' in declared.shape) names.push('Link');
  if (isAppRouteOtherResponse(declared) && !declared.contentType.startsWith('text/')) {
    names.push('ETag', 'Content-Disposition');
    if (status === 206) names.push('Content-Range');
  }
  if (status === 503) names.push('Retry-After');
  return names;
}

const GeneratedJsonResponseSchema = z.object({
  content: z.object({ 'application/json': z.object({ schema: z.record(z.unknown()) }).passthrough() }),
});

function contentOf(declared: AppRouteResponse, generated: unknown, examples: AnyOperationExamples, status: number) {
  if (isAppRouteNoBody(declared)) return {};
  if (isAppRouteOtherResponse(declared)) {
    if (declared.contentType.startsWith('text/'))
      return { content: { [declared.contentType]: { schema: { type: 'string' }, example: examples.text?.[status] } } };
    // The bytes of an attachment come with its own stored media type.
    return { content: { '*/*': { schema: { type: 'string', format: 'binary' } } } };
  }
  const json = GeneratedJsonResponseSchema.parse(generated).content['application/json'];
  return { content: { 'application/json': { ...json, example: examples.responses[status] } } };
}

/** The operation's own problem bodies; on a creating POST a 409 may also be a retry racing the first request. */
function problemBodies(route: AppRoute, status: number, own: ProblemExample[]): Problem[] {
  const inUse = status === 409 && isCreatingPost(route) ? [problemExamples.idempotency_key_in_use] : [];
  return [...own, ...inUse].map((problem) => problemBody(problem, route.path));
}

function describeResponses(route: AppRoute, generated: Operation['responses']): Operation['responses'] {
  const examples = examplesOf(route);
  const responses: Operation['responses'] = {};
  for (const [code, declared] of Object.entries(route.responses)) {
    const status = Number(code);
    responses[code] =
      declared === ProblemSchema
        ? problemResponseRef(status)
        : {
            description: reasonPhrases[status] ?? code,
            headers: headerRefs(successHeaders(status, declared)),
            ...contentOf(declared, generated[code], examples, status),
          };
  }
  // The rate limit and unexpected failures apply to every operation.
  for (const status of [429, 500]) responses[status] ??= problemResponseRef(status);
  // A personal access token without the operation's scope is 403 insufficient_scope.
  if (!isPublicRoute(route)) responses[403] ??= problemResponseRef(403);
  if (isCreatingPost(route)) for (const status of [409, 422]) responses[status] ??= problemResponseRef(status);
  // The operation's own error examples replace the shared answer's, which show every code of the status.
  for (const [code, own] of Object.entries(examples.problems ?? {})) {
    if (!responses[code])
      throw new Error(`${route.method} ${route.path} has examples for ${code}, a status it does not answer`);
    responses[code] = problemResponse(Number(code), problemBodies(route, Number(code), own));
  }
  return responses;
}

const idempotencyKeyParameter: Parameter = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes a retry safe: the first request with a key runs and its answer (2xx or 4xx) is kept 24 hours for the caller; the same request again gets it with `Idempotent-Replayed: true`. The key with another request is 422 `idempotency_key_reused`, one while the first still runs 409 `idempotency_key_in_use`.',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$' },
};

function examplesOf(route: AppRoute): AnyOperationExamples {
  const examples = examplesByRoute.get(route);
  if (!examples) throw new Error(`No examples for ${route.method} ${route.path}`);
  return examples;
}

/**
 * OAuth 2.1 for apps (docs/mcp.md): the authorization code flow with PKCE, its scopes those of
 * personal access tokens. URLs are relative to the server, as `servers` is.
 */
const oauth2 = {
  type: 'oauth2',
  description:
    'OAuth 2.1 for MCP clients and apps: dynamic client registration at `/oauth/register` (RFC 7591), the authorization code flow with PKCE S256 only, rotating refresh tokens, revocation at `/oauth/revoke`; metadata at `/.well-known/oauth-authorization-server` and `/.well-known/oauth-protected-resource`. Access tokens are opaque (`tsk_oat_…`, not JWTs, so the JWT practices of RFC8725 have nothing to pin); one issued for the `/mcp` resource works there only (RFC 8707).',
  flows: {
    authorizationCode: {
      authorizationUrl: '/oauth/authorize',
      tokenUrl: '/oauth/token',
      refreshUrl: '/oauth/token',
      scopes: Object.fromEntries(SCOPES.map((scope) => [scope, scopeDescriptions[scope]])),
    },
  },
};

/** The scope a personal access token needs, as `x-scopes` (OpenAPI 3.0 names scopes only for OAuth schemes) and in the text. */
function scopeExtension(route: AppRoute): { description?: string; 'x-scopes'?: string[] } {
  if (isPublicRoute(route)) return {};
  const scope = scopeOf(route);
  const rule = isLoginOnly(route)
    ? 'Needs an access token from a login: a personal access token or an OAuth token is 403 `forbidden`.'
    : `A personal access token or an OAuth token needs the scope \`${scope}\` (else 403 \`insufficient_scope\`).`;
  return { description: [route.description, rule].filter(Boolean).join('\n\n'), 'x-scopes': scope ? [scope] : [] };
}

/** The operation's curl and typed-client examples: in its description, and as `x-codeSamples`. */
function withCodeSamples(operation: Parameters<OperationMapper>[0], route: AppRoute) {
  const samples = codeSamples(route, String(operation.operationId), examplesOf(route));
  return {
    description: [operation.description, samplesMarkdown(samples)].filter(Boolean).join('\n\n'),
    'x-codeSamples': samples,
  };
}

/** A login's or a personal access token's bearer token, or an app's OAuth token with the operation's scope. */
function securityOf(route: AppRoute): Record<string, string[]>[] {
  if (isPublicRoute(route)) return [];
  const scope = scopeOf(route);
  return isLoginOnly(route) || scope === undefined ? [{ bearerAuth: [] }] : [{ bearerAuth: [] }, { oauth2: [scope] }];
}

const describeScopedOperation: OperationMapper = (operation, route) => ({
  ...operation,
  ...withCodeSamples(operation, route),
  parameters: [
    ...(operation.parameters?.map((parameter) => describeParameter(parameter, route)) ?? []),
    ...(isCreatingPost(route) ? [idempotencyKeyParameter] : []),
  ],
  ...(operation.requestBody ? { requestBody: describeRequestBody(route, operation.requestBody) } : {}),
  responses: describeResponses(route, operation.responses),
  security: securityOf(route),
});

/** Each operation: its scope rule, then its code samples (which show the scoped description). */
const describeOperation: OperationMapper = (operation, route) =>
  describeScopedOperation({ ...operation, ...scopeExtension(route) }, route);

/**
 * Shared error answers that every operation showing the status replaces with its own examples are
 * left out, and so are the headers no answer lists (those on every answer, described once).
 */
function withoutUnusedResponses(document: OpenApiDocument): OpenApiDocument {
  const paths = JSON.stringify(document.paths);
  const responses = Object.entries(document.components?.responses ?? {}).filter(([name]) =>
    paths.includes(`"#/components/responses/${name}"`),
  );
  const used = paths + JSON.stringify(responses);
  const headers = Object.entries(document.components?.headers ?? {}).filter(([name]) =>
    used.includes(`"#/components/headers/${name}"`),
  );
  return {
    ...document,
    components: {
      ...document.components,
      responses: Object.fromEntries(responses),
      headers: Object.fromEntries(headers),
    },
  };
}

/** The OpenAPI 3 document of the contract, with what the generator leaves out filled in. */
export function buildOpenApiDocument(): OpenApiDocument {
  const generated = generateOpenApi(
    contract,
    {
      info: {
        title: 'Task service',
        version: packageVersion(),
        description: INTRODUCTION,
        contact: { name: 'Task service maintainers', url: 'https://github.com/task-service/task-service/issues' },
      },
      // Relative: whichever deployment (production, staging or local) serves this document.
      servers: [
        {
          url: '/',
          description: 'The deployment serving this document: production, staging or local',
          'x-internal': false,
        },
      ],
      tags,
      components: { securitySchemes: { bearerAuth, oauth2 }, headers, responses: problemResponses() },
    },
    { setOperationId: 'concatenated-path', operationMapper: describeOperation },
  );
  return withoutUnusedResponses(withAnyValueSchemas(withNamedModels(withIntegerFormats(generated))));
}

let built: OpenApiDocument | undefined;
/** Built once: it depends only on the contract and the package version. */
export const openApiDocument = (): OpenApiDocument => (built ??= buildOpenApiDocument());

// The document as served at other URLs, a few kept: one deployment is reached under few names.
const MAX_ORIGINS = 8;
const byOrigin = new Map<string, ServedDocument>();

/**
 * The document whose samples name `origin` (`https://tasks.example.com`, `http://127.0.0.1:3000`),
 * the URL a reader reached this service at, instead of SAMPLE_BASE_URL (undefined: SAMPLE_BASE_URL).
 * `origin` must be a checked scheme, host and port (see ./router.ts): it goes into shell commands and
 * JSON as it is.
 */
export function openApiDocumentFor(origin: string | undefined): ServedDocument {
  if (origin === undefined || origin === SAMPLE_BASE_URL) return openApiDocument();
  let document = byOrigin.get(origin);
  if (!document) {
    const text = JSON.stringify(openApiDocument()).replaceAll(SAMPLE_BASE_URL, origin);
    document = OpenApiDocumentSchema.parse(JSON.parse(text));
    if (byOrigin.size >= MAX_ORIGINS) byOrigin.delete(byOrigin.keys().next().value ?? '');
    byOrigin.set(origin, document);
  }
  return document;
}
