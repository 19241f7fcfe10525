// OAuth for tests: a service whose PUBLIC_URL is the address it listens on (the issuer and the
// resources must be where clients reach them), PKCE pairs, registration, and the authorization
// endpoint driven over HTTP the way a browser would (cookie, hidden fields, form posts).
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { afterAll, beforeAll, expect } from 'vitest';
import { z } from 'zod';
import { listen, startService, type ListeningService, type TestService } from './app.js';

/** A port free on loopback right now. */
async function freePort(): Promise<number> {
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const address = probe.address();
  probe.close();
  if (address === null || typeof address === 'string') throw new Error('expected a TCP address');
  return address.port;
}

/** One service for the test file, listening at its PUBLIC_URL. */
export function oauthServiceForFile(env: Record<string, string> = {}): {
  readonly service: TestService;
  readonly baseUrl: string;
} {
  let service: TestService | undefined;
  let listening: ListeningService | undefined;
  beforeAll(async () => {
    const port = await freePort();
    service = await startService({ PUBLIC_URL: `http://127.0.0.1:${port}`, ...env });
    listening = await listen(service, port);
  });
  afterAll(async () => {
    await listening?.close();
    await service?.close();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('The service starts in beforeAll');
    return value;
  };
  return {
    get service() {
      return started(service);
    },
    get baseUrl() {
      return started(listening).baseUrl;
    },
  };
}

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

const RegisteredSchema = z.object({ client_id: z.string(), client_secret: z.string().optional() }).passthrough();

export async function registerClient(
  baseUrl: string,
  body: Record<string, unknown> = {},
): Promise<z.infer<typeof RegisteredSchema>> {
  const res = await fetch(`${baseUrl}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'Test app',
      redirect_uris: ['http://127.0.0.1:9/callback'],
      token_endpoint_auth_method: 'none',
      ...body,
    }),
  });
  expect(res.status, await res.clone().text()).toBe(201);
  return RegisteredSchema.parse(await res.json());
}

export interface AuthorizationRequest {
  clientId: string;
  redirectUri: string;
  challenge?: string;
  scope?: string;
  resource?: string;
  state?: string;
}

export function authorizationUrl(baseUrl: string, request: AuthorizationRequest): string {
  const url = new URL(`${baseUrl}/oauth/authorize`);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', request.clientId);
  url.searchParams.set('redirect_uri', request.redirectUri);
  if (request.challenge !== undefined) {
    url.searchParams.set('code_challenge', request.challenge);
    url.searchParams.set('code_challenge_method', 'S256');
  }
  if (request.scope !== undefined) url.searchParams.set('scope', request.scope);
  if (request.resource !== undefined) url.searchParams.set('resource', request.resource);
  url.searchParams.set('state', request.state ?? 'state-123');
  return url.href;
}

const unescapeHtml = (text: string) =>
  text.replace(/&#(\d+);/g, (_whole, code: string) => String.fromCharCode(Number(code)));

/** The hidden fields of the page's form. */
export function hiddenFieldsOf(html: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [, name = '', value = ''] of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g))
    fields[unescapeHtml(name)] = unescapeHtml(value);
  return fields;
}

/** A browser's view of the authorization endpoint: its cookie jar (one cookie) and the last page. */
export class BrowserLike {
  cookie = '';
  constructor(private readonly baseUrl: string) {}

  private remember(res: Response): void {
    const set = res.headers.get('set-cookie');
    if (set) this.cookie = set.split(';')[0] ?? '';
  }

  async open(url: string): Promise<Response> {
    const res = await fetch(url, { redirect: 'manual', headers: this.cookie ? { cookie: this.cookie } : {} });
    this.remember(res);
    return res;
  }

  async post(fields: Record<string, string>): Promise<Response> {
    const res = await fetch(`${this.baseUrl}/oauth/authorize`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(this.cookie ? { cookie: this.cookie } : {}) },
      body: new URLSearchParams(fields).toString(),
    });
    this.remember(res);
    return res;
  }

  /** Opens `url`, signs in and answers the consent page with `decision`; returns the consent page and the final answer. */
  async authorize(
    url: string,
    user: { email: string; password: string },
    decision: 'approve' | 'deny' = 'approve',
  ): Promise<{ consent: string; answer: Response }> {
    const signIn = await this.open(url);
    expect(signIn.status).toBe(200);
    const signInFields = hiddenFieldsOf(await signIn.text());
    const consentRes = await this.post({
      ...signInFields,
      step: 'sign_in',
      email: user.email,
      password: user.password,
    });
    const consent = await consentRes.text();
    expect(consentRes.status, consent).toBe(200);
    const answer = await this.post({ ...hiddenFieldsOf(consent), step: decision });
    return { consent, answer };
  }
}

/** The query of a redirect answer's Location. */
export function redirectedTo(answer: Response): URL {
  expect(answer.status).toBe(302);
  return new URL(answer.headers.get('location') ?? '');
}

const TokensSchema = z.object({
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number(),
  refresh_token: z.string(),
  scope: z.string(),
});
export type Tokens = z.infer<typeof TokensSchema>;

export async function tokenRequest(baseUrl: string, fields: Record<string, string>): Promise<Response> {
  return fetch(`${baseUrl}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
}

export async function tokensFrom(res: Response): Promise<Tokens> {
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return TokensSchema.parse(JSON.parse(text));
}

/** Registers a client, signs `user` in, approves, and exchanges the code: the whole flow over HTTP. */
export async function connectApp(
  baseUrl: string,
  user: { email: string; password: string },
  options: { scope?: string; resource?: string } = {},
): Promise<{ clientId: string; redirectUri: string; tokens: Tokens; code: string; verifier: string }> {
  const redirectUri = 'http://127.0.0.1:9/callback';
  const { client_id: clientId } = await registerClient(baseUrl, { redirect_uris: [redirectUri] });
  const { verifier, challenge } = pkcePair();
  const browser = new BrowserLike(baseUrl);
  const url = authorizationUrl(baseUrl, { clientId, redirectUri, challenge, ...options });
  const { answer } = await browser.authorize(url, user);
  const code = redirectedTo(answer).searchParams.get('code') ?? '';
  const tokens = await tokensFrom(
    await tokenRequest(baseUrl, {
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      client_id: clientId,
      redirect_uri: redirectUri,
      ...(options.resource !== undefined && { resource: options.resource }),
    }),
  );
  return { clientId, redirectUri, tokens, code, verifier };
}
