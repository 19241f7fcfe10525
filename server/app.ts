import express, { type Express } from 'express';
import { contract } from '@task-service/client';
import { activityRouter } from './activity/router.js';
import { attachmentsRouter } from './attachments/router.js';
import { commentsRouter } from './comments/router.js';
import { authRouter } from './auth/router.js';
import type { AppContext } from './context.js';
import { eventsRouter } from './events/router.js';
import { corsFor } from './http/cors.js';
import { errorHandler, unmatchedRoute } from './http/errors.js';
import { authenticator } from './authenticate.js';
import { requestAudience } from './mcp/audience.js';
import { exceptOpenOAuthPaths, oauthGrantsRouter, serveOAuth } from './oauth/router.js';
import { resourceMetadataUrl } from './oauth/resource.js';
import { arrival } from './http/arrival.js';
import { contractRules, identifyCaller, jsonBodies, rateLimit } from './http/middleware.js';
import { warnUntrustedForwarding } from './http/proxy.js';
import { idempotencyKeys } from './http/idempotency.js';
import { contractEndpoints } from './http/dispatch.js';
import { methodsByPath } from './http/routes.js';
import { serveMetrics } from './metrics/endpoint.js';
import { serveMcp } from './mcp/router.js';
import { httpMetrics } from './metrics/http-metrics.js';
import { serveProblemPages } from './openapi/problem-pages.js';
import { docsRouter, serveDocsAssets } from './openapi/router.js';
import { projectsRouter } from './projects/router.js';
import { relationsRouter } from './relations/router.js';
import { serviceRouter } from './service/router.js';
import { tagsRouter } from './tags/router.js';
import { tasksRouter } from './tasks/router.js';
import { personalAccessTokensRouter } from './tokens/router.js';
import { usersRouter } from './users/router.js';
import { webhooksRouter } from './webhooks/router.js';

/** Builds the HTTP application from its context; no globals, so tests build as many as they like. */
export function buildApp(ctx: AppContext): Express {
  const app = express();
  app.disable('x-powered-by');
  // Tasks carry their own ETag (the version); Express's body hash would contradict it.
  app.set('etag', false);
  app.set('trust proxy', ctx.config.trustProxy);
  app.set('query parser', 'simple');

  const metrics = httpMetrics();
  const cors = corsFor(ctx.config.corsOrigins);
  app.use(
    arrival({
      logger: ctx.logger,
      metrics,
      // The OAuth discovery, registration and token endpoints answer CORS for any origin themselves.
      cors: cors && ctx.config.oauth.enabled ? exceptOpenOAuthPaths(cors) : cors,
      checkForwarding: warnUntrustedForwarding(ctx),
    }),
  );
  app.use(identifyCaller(authenticator(ctx), requestAudience(ctx.signingKey)));
  if (ctx.requestLimiter) app.use(rateLimit(ctx.requestLimiter.limiter));
  // strict: false lets a scalar body (`"x"`, `null`) through to validation: valid JSON, wrong shape.
  app.use(
    jsonBodies(
      express.json({ limit: '1mb', strict: false, type: ['application/json', 'application/merge-patch+json'] }),
    ),
  );

  serveProblemPages(app);
  const routers = {
    auth: authRouter(ctx),
    users: usersRouter(ctx),
    tasks: tasksRouter(ctx),
    attachments: attachmentsRouter(ctx),
    comments: commentsRouter(ctx),
    activity: activityRouter(ctx),
    tags: tagsRouter(ctx),
    projects: projectsRouter(ctx),
    relations: relationsRouter(ctx),
    events: eventsRouter(ctx),
    webhooks: webhooksRouter(ctx),
    personalAccessTokens: personalAccessTokensRouter(ctx),
    oauthGrants: oauthGrantsRouter(ctx),
    service: serviceRouter(ctx),
    docs: docsRouter(),
  };
  app.use(
    contractEndpoints(contract, routers, {
      logInitialization: false,
      responseValidation: ctx.config.validateResponses,
      globalMiddleware: [contractRules, idempotencyKeys(ctx)],
    }),
  );

  // After the operations, which most requests are for: each layer above them costs every request
  // its turn through the router, and no operation's path is one of these.
  if (ctx.config.oauth.enabled) serveOAuth(app, ctx);
  serveDocsAssets(app);
  serveMetrics(app, ctx, metrics);
  if (ctx.config.mcpEnabled) serveMcp(app, ctx);
  app.use(unmatchedRoute(methodsByPath(contract)));
  app.use(errorHandler(ctx.config.oauth.enabled ? (path) => resourceMetadataUrl(ctx.config, path) : undefined));
  return app;
}
