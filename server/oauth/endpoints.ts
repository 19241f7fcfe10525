// The OAuth 2.1 endpoints themselves: the MCP SDK's handlers (authorization, token, registration,
// revocation, metadata) around our provider. Loaded at the first request to one of them
// (router.ts): the SDK's handlers bring zod 4, express-rate-limit and pkce-challenge, some hundred
// modules that a start, and a process that never sees an OAuth client, need not load.
import express, { type RequestHandler } from 'express';
import { authorizationHandler, redirectUriMatches } from '@modelcontextprotocol/sdk/server/auth/handlers/authorize.js';
import { metadataHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/metadata.js';
import { clientRegistrationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/register.js';
import { revocationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/revoke.js';
import { tokenHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/token.js';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import { OAUTH_PATHS, SCOPES } from '@task-service/client';
import type { Config } from '../config.js';
import type { AppContext } from '../context.js';
import { MAX_REDIRECT_URIS, redirectUriRefusal } from './clients.js';
import { errorBody, sendPage } from './pages.js';
import { oauthProvider } from './provider.js';
import { issuerOf, MCP_PATH, mcpResourceOf } from './resource.js';
import { hashSecret } from './secrets.js';

/** RFC 8414 authorization-server metadata. */
export function authorizationServerMetadata(config: Config) {
  const issuer = issuerOf(config);
  return {
    issuer,
    authorization_endpoint: `${issuer}${OAUTH_PATHS.authorize}`,
    token_endpoint: `${issuer}${OAUTH_PATHS.token}`,
    registration_endpoint: `${issuer}${OAUTH_PATHS.register}`,
    revocation_endpoint: `${issuer}${OAUTH_PATHS.revoke}`,
    scopes_supported: [...SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none', 'client_secret_post'],
    revocation_endpoint_auth_methods_supported: ['none', 'client_secret_post'],
    authorization_response_iss_parameter_supported: true,
    service_documentation: `${issuer}/docs`,
  };
}

/** RFC 9728 protected-resource metadata for `resource`. */
const protectedResourceMetadata = (config: Config, resource: string) => ({
  resource,
  authorization_servers: [issuerOf(config)],
  scopes_supported: [...SCOPES],
  bearer_methods_supported: ['header'],
  resource_name: resource.endsWith(MCP_PATH) ? 'Task service (MCP)' : 'Task service',
  resource_documentation: `${config.publicUrl}/docs`,
});

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;

/** A confidential client's secret is stored as its hash, so the one it sends is compared as a hash too. */
const hashedClientSecret: RequestHandler = (req, _res, next) => {
  const body: unknown = req.body;
  if (isRecord(body) && typeof body.client_secret === 'string') body.client_secret = hashSecret(body.client_secret);
  next();
};

/** A refused redirect URI is RFC 7591's `invalid_redirect_uri`, whatever the SDK's schema would say of it. */
const redirectUrisChecked: RequestHandler = (req, res, next) => {
  const body: unknown = req.body;
  const uris: unknown = isRecord(body) ? body.redirect_uris : undefined;
  if (!Array.isArray(uris)) return next();
  const refusal =
    uris.length === 0 || uris.length > MAX_REDIRECT_URIS
      ? `Register 1 to ${MAX_REDIRECT_URIS} redirect URIs`
      : uris
          .map((uri) => (typeof uri === 'string' ? redirectUriRefusal(uri) : 'A redirect URI is a string'))
          .find(Boolean);
  if (refusal === undefined) return next();
  res.status(400).json({ error: 'invalid_redirect_uri', error_description: refusal });
};

/**
 * An unknown client or a redirect URI it did not register gets a page, never a redirect (the SDK's
 * handler would answer JSON, which a person in a browser cannot read).
 */
function unknownClientPage(clients: OAuthRegisteredClientsStore): RequestHandler {
  return (req, res, next) => {
    const given: unknown = req.method === 'POST' ? req.body : req.query;
    const fields = isRecord(given) ? given : {};
    const clientId = typeof fields.client_id === 'string' ? fields.client_id : '';
    const redirectUri = typeof fields.redirect_uri === 'string' ? fields.redirect_uri : undefined;
    const refuse = (heading: string, detail: string) =>
      sendPage(res, { title: heading, status: 400, body: errorBody(heading, detail) });
    Promise.resolve(clients.getClient(clientId)).then((client) => {
      if (!client) return refuse('Unknown app', 'No app is registered with this client_id.');
      const registered = client.redirect_uris;
      if (
        redirectUri === undefined
          ? registered.length !== 1
          : !registered.some((uri) => redirectUriMatches(redirectUri, uri))
      )
        return refuse(
          'Unregistered return address',
          'The redirect_uri is not one this app registered, so the browser is not sent there.',
        );
      next();
    }, next);
  };
}

/** Every redirect of the authorization endpoint names the issuer (RFC 9207), the SDK's error redirects included. */
function withIssuer(issuer: string): RequestHandler {
  return (_req, res, next) => {
    const redirect = res.redirect.bind(res);
    res.redirect = (first: string | number, second?: string) => {
      const status = typeof first === 'number' ? first : 302;
      const target = new URL(typeof first === 'string' ? first : (second ?? ''));
      if (!target.searchParams.has('iss')) target.searchParams.set('iss', issuer);
      redirect(status, target.href);
    };
    next();
  };
}

/** Handlers run one after another, as one handler. */
const inTurn = (...handlers: RequestHandler[]): RequestHandler => express.Router().use(handlers);

/** Each endpoint's handlers (discovery, registration, authorization, token, revocation); router.ts mounts them. */
export function oauthEndpoints(ctx: AppContext) {
  const provider = oauthProvider(ctx);
  const form = express.urlencoded({ extended: false, limit: '16kb' });
  const perHour = ctx.config.oauth.registrationsPerAddressPerHour;
  // The general rate limit and the login throttle already apply: the SDK's own per-route limits would count twice.
  return {
    authorizationServerMetadata: metadataHandler(authorizationServerMetadata(ctx.config)),
    mcpResourceMetadata: metadataHandler(protectedResourceMetadata(ctx.config, mcpResourceOf(ctx.config))),
    resourceMetadata: metadataHandler(protectedResourceMetadata(ctx.config, ctx.config.publicUrl)),
    authorize: inTurn(
      form,
      unknownClientPage(provider.clientsStore),
      withIssuer(issuerOf(ctx.config)),
      authorizationHandler({ provider, rateLimit: false }),
    ),
    token: inTurn(form, hashedClientSecret, tokenHandler({ provider, rateLimit: false })),
    revoke: inTurn(form, hashedClientSecret, revocationHandler({ provider, rateLimit: false })),
    register: inTurn(
      redirectUrisChecked,
      clientRegistrationHandler({
        clientsStore: provider.clientsStore,
        clientIdGeneration: false,
        // Unused clients are removed after 30 days; a secret that expired sooner would strand a live one.
        clientSecretExpirySeconds: 0,
        // Keyed by req.ip, which TRUST_PROXY governs; the app warns about forwarding itself (http/proxy.ts).
        rateLimit:
          perHour > 0
            ? { windowMs: 3600_000, max: perHour, validate: { trustProxy: false, xForwardedForHeader: false } }
            : false,
      }),
    ),
  } satisfies Record<string, RequestHandler>;
}

export type OAuthEndpoints = ReturnType<typeof oauthEndpoints>;
