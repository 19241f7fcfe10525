import { z } from 'zod';
import {
  boundedArray,
  c,
  commonErrors,
  IdSchema,
  listOf,
  ProblemSchema,
  storableText,
  TimestampSchema,
  type Alias,
  type Named,
} from './common.js';
import { loginOnly, ScopeSchema } from './scopes.js';

/** Personal access tokens: `tsk_pat_` + 43 base62 characters of randomness + a 6-character CRC32 checksum. */
export const PERSONAL_ACCESS_TOKEN_PREFIX = 'tsk_pat_';
export const MAX_LIVE_TOKENS = 50;

const personalAccessTokenSchema = z.object({
  id: IdSchema.describe("The token's id (UUIDv7)"),
  name: z.string().describe('What the token is for, as its owner named it'),
  scopes: z.array(ScopeSchema).describe('What the token may do; a missing scope is 403 insufficient_scope'),
  prefix: z
    .string()
    .describe('`tsk_pat_` and the first 4 random characters: enough to recognise the token, never to use it'),
  createdAt: TimestampSchema.describe('When the token was created'),
  expiresAt: TimestampSchema.describe('After this the token is refused (401, detail `expired`)'),
  lastUsedAt: TimestampSchema.nullable().describe(
    'When the token last authenticated a request (written at most once a minute); null when never',
  ),
});
export interface PersonalAccessToken extends z.output<typeof personalAccessTokenSchema> {}
/** The schema's own type, by name (it keeps `.extend` and `.strict`). */
export interface PersonalAccessTokenSchemaType extends Alias<typeof personalAccessTokenSchema> {}
export const PersonalAccessTokenSchema: PersonalAccessTokenSchemaType = personalAccessTokenSchema;

const createdPersonalAccessTokenSchema = PersonalAccessTokenSchema.extend({
  token: z
    .string()
    .describe(
      'The token itself, shown only in this answer: send it as `Authorization: Bearer tsk_pat_…`. Keep it secret, like a password',
    ),
});
export interface CreatedPersonalAccessToken extends z.output<typeof createdPersonalAccessTokenSchema> {}
export const CreatedPersonalAccessTokenSchema: Named<CreatedPersonalAccessToken> = createdPersonalAccessTokenSchema;

const personalAccessTokenCreateSchema = z
  .object({
    name: storableText(z.string().trim().min(1).max(100)).describe(
      'What the token is for, 1 to 100 characters after trimming',
    ),
    scopes: boundedArray(ScopeSchema, 20, 1).describe(
      'One or more scopes; `admin` only for administrators (403 otherwise)',
    ),
    expiresInDays: z
      .number()
      .int()
      .min(1)
      .max(366)
      .default(30)
      .describe('Days until the token expires, 1 to 366 (default 30)'),
  })
  .strict();
export interface PersonalAccessTokenCreateOutput extends z.output<typeof personalAccessTokenCreateSchema> {}
export interface PersonalAccessTokenCreateInput extends z.input<typeof personalAccessTokenCreateSchema> {}
/** What POST /tokens accepts (`expiresInDays` may be left out): the schema's input. */
export type PersonalAccessTokenCreate = PersonalAccessTokenCreateInput;
export const PersonalAccessTokenCreateSchema: z.ZodType<
  PersonalAccessTokenCreateOutput,
  z.ZodTypeDef,
  PersonalAccessTokenCreateInput
> = personalAccessTokenCreateSchema;

const personalAccessTokenListQuerySchema = z
  .object({
    userId: IdSchema.optional().describe(
      "Administrators: another user's tokens (others: 403 for anyone but themselves)",
    ),
  })
  .strict();
export interface PersonalAccessTokenListQuery extends z.output<typeof personalAccessTokenListQuerySchema> {}
export interface PersonalAccessTokenListQueryInput extends z.input<typeof personalAccessTokenListQuerySchema> {}
export const PersonalAccessTokenListQuerySchema: z.ZodType<
  PersonalAccessTokenListQuery,
  z.ZodTypeDef,
  PersonalAccessTokenListQueryInput
> = personalAccessTokenListQuerySchema;

const TokenParams = z.object({
  token_id: IdSchema.describe('One of your tokens (any for an administrator); another is 404'),
});

export const personalAccessTokensContract = c.router(
  {
    create: {
      method: 'POST',
      path: '/tokens',
      metadata: loginOnly,
      body: PersonalAccessTokenCreateSchema,
      responses: { 201: CreatedPersonalAccessTokenSchema, 403: ProblemSchema, 409: ProblemSchema },
      summary: 'Create a personal access token (the token is in this answer only)',
      description: `Creates a token for scripts, integrations and agents, with the scopes it may use. Needs an access token from a login (a personal access token is 403 forbidden); \`admin\` only for administrators (403). At most ${MAX_LIVE_TOKENS} live tokens a user (409 quota_exceeded).`,
    },
    list: {
      method: 'GET',
      path: '/tokens',
      metadata: loginOnly,
      query: PersonalAccessTokenListQuerySchema,
      responses: { 200: listOf(PersonalAccessTokenSchema), 403: ProblemSchema },
      summary: "List the caller's live personal access tokens, newest first",
      description:
        "The caller's tokens that are neither revoked nor expired, newest first (administrators: another user's with `userId`). The token values are never shown again.",
    },
    get: {
      method: 'GET',
      path: '/tokens/:token_id',
      metadata: loginOnly,
      pathParams: TokenParams,
      responses: { 200: PersonalAccessTokenSchema, 403: ProblemSchema, 404: ProblemSchema },
      summary: 'Get a personal access token',
      description: "One of the caller's tokens (any for an administrator), without its value.",
    },
    remove: {
      method: 'DELETE',
      path: '/tokens/:token_id',
      metadata: loginOnly,
      pathParams: TokenParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 403: ProblemSchema, 404: ProblemSchema },
      summary: 'Revoke a personal access token',
      description: 'Revokes the token: it is refused from now on, on every instance, and is gone from the list.',
    },
  },
  { commonResponses: commonErrors },
);
