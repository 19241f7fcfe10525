// The OAuth 2.1 authorization server for MCP clients and apps (docs/mcp.md), mounted at the
// service's own paths under /oauth (its endpoints, the MCP SDK's handlers around our provider, are
// in endpoints.ts); and the user's grants as contract operations.
import type { Express, RequestHandler } from 'express';
import { initServer } from '@ts-rest/express';
import { OAUTH_PATHS, oauthGrantsContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { principalOf } from '../http/principal.js';
import { listGrants, revokeGrant } from './access.js';
import type { OAuthEndpoints } from './endpoints.js';
import { MCP_PATH } from './resource.js';

/** Paths any browser-based MCP client may call from any origin (the SDK's handlers answer CORS there). */
const OPEN_CORS_PATHS = new Set<string>([
  OAUTH_PATHS.token,
  OAUTH_PATHS.register,
  OAUTH_PATHS.revoke,
  OAUTH_PATHS.authorizationServerMetadata,
  OAUTH_PATHS.protectedResourceMetadata,
  `${OAUTH_PATHS.protectedResourceMetadata}${MCP_PATH}`,
]);

/** The service's CORS for its configured origins, except on the open OAuth endpoints. */
export const exceptOpenOAuthPaths =
  (cors: RequestHandler): RequestHandler =>
  (req, res, next) =>
    OPEN_CORS_PATHS.has(req.path) ? next() : cors(req, res, next);

/**
 * Serves discovery, registration, authorization, token and revocation. The endpoints (the MCP SDK's
 * handlers, endpoints.ts) are loaded at the first request to one of them; requests that come
 * meanwhile wait for the same load.
 */
export function serveOAuth(app: Express, ctx: AppContext): void {
  let loading: Promise<OAuthEndpoints> | undefined;
  const endpoint =
    (name: keyof OAuthEndpoints): RequestHandler =>
    async (req, res, next) => {
      loading ??= import('./endpoints.js').then(({ oauthEndpoints }) => oauthEndpoints(ctx));
      (await loading)[name](req, res, next);
    };
  const prm = OAUTH_PATHS.protectedResourceMetadata;
  app.use(OAUTH_PATHS.authorizationServerMetadata, endpoint('authorizationServerMetadata'));
  // Before the service's own metadata, whose path is a prefix of this one.
  app.use(`${prm}${MCP_PATH}`, endpoint('mcpResourceMetadata'));
  app.use(prm, endpoint('resourceMetadata'));
  app.use(OAUTH_PATHS.authorize, endpoint('authorize'));
  app.use(OAUTH_PATHS.token, endpoint('token'));
  app.use(OAUTH_PATHS.revoke, endpoint('revoke'));
  app.use(OAUTH_PATHS.register, endpoint('register'));
}

export function oauthGrantsRouter(ctx: AppContext) {
  return initServer().router(oauthGrantsContract, {
    list: async ({ req }) => ({ status: 200, body: { items: await listGrants(ctx, principalOf(req)) } }),
    remove: async ({ params, req }) => {
      await revokeGrant(ctx, principalOf(req), params.grant_id);
      return { status: 204, body: undefined };
    },
  });
}
