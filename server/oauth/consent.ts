// The authorization endpoint's own part (the SDK's handler has already checked the client, the
// redirect URI and the PKCE parameters): sign in, then approve or deny, each form carrying a CSRF
// token bound to a cookie (double submit), the approval a short-lived signed ticket naming the user
// and the very request they signed in for.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Request, Response } from 'express';
import { z } from 'zod';
import { InvalidRequestError, InvalidTargetError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { AuthorizationParams } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import type { OAuthClientInformationFull } from '@modelcontextprotocol/sdk/shared/auth.js';
import { SCOPES, type Scope } from '@task-service/client';
import { derivedSecret } from '../security/keys.js';
import { signIn } from '../auth/credentials.js';
import type { AppContext } from '../context.js';
import { tables } from '../db/query.js';
import { AppError } from '../http/errors.js';
import { clientAddress } from '../http/principal.js';
import { issueAuthorizationCode } from './grants.js';
import { consentBody, errorBody, hiddenFields, sendPage, signInBody } from './pages.js';
import { audienceOf, issuerOf, mcpResourceOf } from './resource.js';
import { hashSecret } from './secrets.js';

const CSRF_COOKIE = 'oauth_csrf';
const TICKET_TTL_MS = 10 * 60_000;

const FormSchema = z.object({
  csrf_token: z.string().max(100).optional(),
  step: z.enum(['sign_in', 'approve', 'deny']).optional(),
  email: z.string().max(254).optional(),
  password: z.string().max(128).optional(),
  ticket: z.string().max(1000).optional(),
});

const keys = new WeakMap<AppContext, Promise<Uint8Array>>();
/** The key that signs tickets, derived from the token key every instance shares. */
function ticketKey(ctx: AppContext): Promise<Uint8Array> {
  let key = keys.get(ctx);
  if (!key) keys.set(ctx, (key = derivedSecret(ctx.signingKey, 'oauth consent tickets')));
  return key;
}

/** What a grant holds when none of the scopes asked for is known, or may be granted to the user. */
const FALLBACK_SCOPE: Scope = 'tasks:read';

/** The scopes asked for that this server knows; none asked (or none known) means tasks:read. */
export function requestedScopes(asked: string[] | undefined): Scope[] {
  const known = SCOPES.filter((scope) => asked?.includes(scope));
  return known.length > 0 ? known : [FALLBACK_SCOPE];
}

function cookieOf(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return undefined;
}

const sameSecret = (a: string, b: string): boolean => {
  const [x, y] = [Buffer.from(a), Buffer.from(b)];
  return x.length === y.length && timingSafeEqual(x, y);
};

/** The browser's CSRF token: the cookie's, or a new one set now. */
function csrfToken(ctx: AppContext, req: Request, res: Response): string {
  const existing = cookieOf(req, CSRF_COOKIE);
  if (existing !== undefined && /^[A-Za-z0-9_-]{43}$/.test(existing)) return existing;
  const token = randomBytes(32).toString('base64url');
  const secure = ctx.config.publicUrl.startsWith('https:') ? '; Secure' : '';
  res.append('Set-Cookie', `${CSRF_COOKIE}=${token}; Path=/oauth/; HttpOnly; SameSite=Strict; Max-Age=3600${secure}`);
  return token;
}

/** What the ticket binds: the client and every parameter of its request. */
const requestDigest = (client: OAuthClientInformationFull, params: AuthorizationParams): string =>
  hashSecret(
    JSON.stringify([
      client.client_id,
      params.redirectUri,
      params.codeChallenge,
      params.scopes,
      params.state,
      params.resource?.href,
    ]),
  );

async function signTicket(ctx: AppContext, fields: { user: string; csrf: string; request: string }): Promise<string> {
  const payload = Buffer.from(
    JSON.stringify({ ...fields, csrf: hashSecret(fields.csrf), exp: Date.now() + TICKET_TTL_MS }),
  ).toString('base64url');
  const mac = createHmac('sha256', await ticketKey(ctx))
    .update(payload)
    .digest('base64url');
  return `${payload}.${mac}`;
}

const TicketSchema = z.object({ user: z.string().uuid(), csrf: z.string(), request: z.string(), exp: z.number() });

/** The user a ticket names, if it is this server's, unexpired, for this browser and this request. */
async function ticketUser(ctx: AppContext, ticket: string, csrf: string, request: string): Promise<string | undefined> {
  const [payload = '', mac = ''] = ticket.split('.');
  const expected = createHmac('sha256', await ticketKey(ctx))
    .update(payload)
    .digest('base64url');
  if (!sameSecret(mac, expected)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(payload, 'base64url').toString());
  } catch {
    return undefined;
  }
  const fields = TicketSchema.safeParse(parsed);
  if (!fields.success || fields.data.exp < Date.now()) return undefined;
  return fields.data.csrf === hashSecret(csrf) && fields.data.request === request ? fields.data.user : undefined;
}

/** Where Chromium lets the form's redirect go: the redirect URI's origin, or its private-use scheme. */
function formTarget(redirectUri: string): string {
  const url = new URL(redirectUri);
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : url.protocol;
}

function redirectHost(redirectUri: string): string {
  const url = new URL(redirectUri);
  return url.host === '' ? url.protocol.replace(/:$/, '') : url.host;
}

/** The authorization response (RFC 6749 §4.1.2, with RFC 9207's `iss`). */
function redirectTo(ctx: AppContext, res: Response, params: AuthorizationParams, answer: Record<string, string>): void {
  const target = new URL(params.redirectUri);
  for (const [name, value] of Object.entries(answer)) target.searchParams.set(name, value);
  if (params.state !== undefined) target.searchParams.set('state', params.state);
  target.searchParams.set('iss', issuerOf(ctx.config));
  res.redirect(302, target.href);
}

/** Renders the step the browser is at, or answers the app (provider.authorize). */
export async function authorizationStep(
  ctx: AppContext,
  client: OAuthClientInformationFull,
  params: AuthorizationParams,
  res: Response,
): Promise<void> {
  const req = res.req;
  const audience = audienceOf(ctx.config, params.resource);
  if (audience === undefined) throw new InvalidTargetError('resource must be this service or its MCP endpoint');
  // An S256 challenge is the base64url SHA-256 of the verifier: 43 characters, nothing else.
  if (!/^[A-Za-z0-9_-]{43}$/.test(params.codeChallenge))
    throw new InvalidRequestError('code_challenge must be the base64url SHA-256 of the verifier (43 characters)');
  const appName = client.client_name?.trim() || 'An unnamed app';
  const csrf = csrfToken(ctx, req, res);
  const request = {
    client_id: client.client_id,
    redirect_uri: params.redirectUri,
    response_type: 'code',
    code_challenge: params.codeChallenge,
    code_challenge_method: 'S256',
    scope: params.scopes && params.scopes.length > 0 ? params.scopes.join(' ') : undefined,
    state: params.state,
    resource: params.resource?.href,
    csrf_token: csrf,
  };
  const formTargets = [formTarget(params.redirectUri)];
  const signInPage = (error?: string, status = 200, email?: string) =>
    sendPage(res, {
      title: 'Sign in',
      status,
      formTargets,
      body: signInBody(appName, hiddenFields(request), error, email),
    });

  if (req.method !== 'POST') return signInPage();
  const form = FormSchema.safeParse(req.body);
  const sent = form.success ? form.data : {};
  if (sent.csrf_token === undefined || !sameSecret(sent.csrf_token, cookieOf(req, CSRF_COOKIE) ?? '')) {
    return sendPage(res, {
      title: 'Form expired',
      status: 403,
      body: errorBody(
        'This form has expired',
        'The form was not sent from this page in this browser (or its cookie expired).',
      ),
    });
  }
  const digest = requestDigest(client, params);

  if (sent.step === 'sign_in' || sent.step === undefined) {
    let user;
    try {
      user = await signIn(ctx, { email: sent.email ?? '', password: sent.password ?? '', address: clientAddress(req) });
    } catch (error) {
      if (!(error instanceof AppError) || (error.code !== 'invalid_credentials' && error.code !== 'rate_limited'))
        throw error;
      for (const [name, value] of Object.entries(error.options.headers ?? {})) res.setHeader(name, value);
      // The form again with what went wrong (a 401 would need a challenge no browser can answer).
      return signInPage(error.detail, error.code === 'rate_limited' ? 429 : 200, sent.email);
    }
    const scopes = requestedScopes(params.scopes);
    const granted = scopes.filter((scope) => scope !== 'admin' || user.role === 'admin');
    const ticket = await signTicket(ctx, { user: user.id, csrf, request: digest });
    const view = {
      appName,
      user,
      scopes: granted.length > 0 ? granted : [FALLBACK_SCOPE],
      adminDropped: granted.length < scopes.length,
      mcpOnly: audience === mcpResourceOf(ctx.config),
      redirectHost: redirectHost(params.redirectUri),
    };
    return sendPage(res, {
      title: 'Allow access',
      formTargets,
      body: consentBody(view, hiddenFields({ ...request, ticket })),
    });
  }

  const userId = sent.ticket === undefined ? undefined : await ticketUser(ctx, sent.ticket, csrf, digest);
  const user =
    userId === undefined
      ? undefined
      : await ctx.db.sql.first(tables.selectFrom('users').select(['id', 'role']).where('id', '=', userId));
  if (!user) {
    return sendPage(res, {
      title: 'Sign-in expired',
      status: 400,
      body: errorBody('The sign-in has expired', 'Sign in again to decide: the approval form is valid for 10 minutes.'),
    });
  }
  if (sent.step === 'deny')
    return redirectTo(ctx, res, params, { error: 'access_denied', error_description: 'The user denied access' });
  const scopes = requestedScopes(params.scopes).filter((scope) => scope !== 'admin' || user.role === 'admin');
  const code = await issueAuthorizationCode(ctx, {
    clientId: client.client_id,
    userId: user.id,
    redirectUri: params.redirectUri,
    codeChallenge: params.codeChallenge,
    scopes: scopes.length > 0 ? scopes : [FALLBACK_SCOPE],
    resource: audience,
  });
  ctx.logger.info({ userId: user.id, clientId: client.client_id }, 'OAuth access approved');
  redirectTo(ctx, res, params, { code });
}
