import { z } from 'zod';
import { c, commonErrors, IdSchema, listOf, ProblemSchema, TimestampSchema, type Alias } from './common.js';
import { loginOnly, ScopeSchema } from './scopes.js';

// OAuth 2.1 for MCP clients and apps (docs/mcp.md): the protocol's own endpoints (/oauth/authorize,
// /oauth/token, /oauth/register, /oauth/revoke and the metadata under /.well-known) speak RFC 6749,
// not this interface; what is here is the user's view of the apps they connected.

/** Where the OAuth endpoints are, relative to the service's public URL. */
export const OAUTH_PATHS = {
  authorize: '/oauth/authorize',
  token: '/oauth/token',
  register: '/oauth/register',
  revoke: '/oauth/revoke',
  authorizationServerMetadata: '/.well-known/oauth-authorization-server',
  protectedResourceMetadata: '/.well-known/oauth-protected-resource',
} as const;

const oauthGrantSchema = z.object({
  id: IdSchema.describe("The grant's id (UUIDv7)"),
  clientId: z.string().describe('The app, as it registered itself'),
  clientName: z.string().describe('The name the app registered under (its own claim, unverified)'),
  scopes: z.array(ScopeSchema).describe('What you approved for the app'),
  resource: z
    .string()
    .describe("The audience of the app's tokens: the service's URL (everything) or its `/mcp` endpoint only"),
  createdAt: TimestampSchema.describe('When you approved the app'),
  lastUsedAt: TimestampSchema.describe('When the app last used or refreshed a token (written at most once a minute)'),
});
export interface OAuthGrant extends z.output<typeof oauthGrantSchema> {}
export interface OAuthGrantSchemaType extends Alias<typeof oauthGrantSchema> {}
export const OAuthGrantSchema: OAuthGrantSchemaType = oauthGrantSchema;

const GrantParams = z.object({ grant_id: IdSchema.describe('One of your grants; another is 404') });

export const oauthGrantsContract = c.router(
  {
    list: {
      method: 'GET',
      path: '/oauth/grants',
      metadata: loginOnly,
      responses: { 200: listOf(OAuthGrantSchema), 403: ProblemSchema },
      summary: 'List the apps you connected with OAuth, newest first',
      description:
        'The grants you approved on the sign-in page that are neither revoked nor unused for 30 days. Needs an access token from a login (a personal access token or an OAuth token is 403 forbidden).',
    },
    remove: {
      method: 'DELETE',
      path: '/oauth/grants/:grant_id',
      metadata: loginOnly,
      pathParams: GrantParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 403: ProblemSchema, 404: ProblemSchema },
      summary: 'Disconnect an app: revoke its grant',
      description:
        "Revokes every token of the grant at once, on every instance: the app's next request is 401, its open event streams end, and it must ask you again.",
    },
  },
  { commonResponses: commonErrors },
);
