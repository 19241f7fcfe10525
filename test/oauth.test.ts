// The OAuth 2.1 authorization server for MCP clients and apps (docs/mcp.md), over HTTP against the
// real database: discovery, registration, the authorization endpoint driven as a browser would,
// the token endpoint, audiences, scopes, revocation and the user's grants.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SCOPES } from '../contract/index.js';
import { tables } from '../server/db/query.js';
import { hashSecret, newAccessToken } from '../server/oauth/secrets.js';
import {
  authorizationUrl,
  BrowserLike,
  connectApp,
  pkcePair,
  redirectedTo,
  registerClient,
  tokenRequest,
  tokensFrom,
} from './support/oauth.js';
import { oauthServiceForFile } from './support/oauth.js';
import { createPersonalToken } from './support/personal-tokens.js';
import { expectProblem } from './support/problems.js';
import { openSse } from './support/sse.js';
import { countOf } from './support/rows.js';
import { registerUser } from './support/users.js';

const served = oauthServiceForFile();

const mcpInitialize = (baseUrl: string, auth: string) =>
  fetch(`${baseUrl}/mcp`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/list',
      params: {},
    }),
  });

describe('discovery', () => {
  it('publishes protected-resource metadata for the MCP endpoint and the service (RFC 9728)', async () => {
    const base = served.baseUrl;
    const mcp = await (await fetch(`${base}/.well-known/oauth-protected-resource/mcp`)).json();
    expect(mcp).toMatchObject({
      resource: `${base}/mcp`,
      authorization_servers: [base],
      scopes_supported: [...SCOPES],
      bearer_methods_supported: ['header'],
    });
    const root = await fetch(`${base}/.well-known/oauth-protected-resource`);
    expect(root.headers.get('access-control-allow-origin')).toBe('*');
    expect(await root.json()).toMatchObject({ resource: base, authorization_servers: [base] });
  });

  it('publishes authorization-server metadata (RFC 8414)', async () => {
    const base = served.baseUrl;
    const metadata = await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json();
    expect(metadata).toMatchObject({
      issuer: base,
      authorization_endpoint: `${base}/oauth/authorize`,
      token_endpoint: `${base}/oauth/token`,
      registration_endpoint: `${base}/oauth/register`,
      revocation_endpoint: `${base}/oauth/revoke`,
      scopes_supported: [...SCOPES],
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      authorization_response_iss_parameter_supported: true,
    });
    expect(metadata).toHaveProperty('token_endpoint_auth_methods_supported', expect.arrayContaining(['none']));
  });

  it('names the metadata in the challenge of every 401, of /mcp and of the REST interface, without a scope', async () => {
    const base = served.baseUrl;
    const mcp = await mcpInitialize(base, '');
    expect(mcp.status).toBe(401);
    expect(mcp.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
    );
    const rest = await served.service.http.get('/tasks');
    expectProblem(rest, 401, 'unauthenticated');
    expect(rest.headers['www-authenticate']).toBe(
      `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource"`,
    );
    const invalid = await mcpInitialize(base, 'Bearer tsk_oat_nonsense');
    expect(invalid.status).toBe(401);
    const challenge = invalid.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer error="invalid_token", error_description="[^"]+", resource_metadata="/);
    expect(challenge).not.toMatch(/scope=/);
  });
});

describe('dynamic client registration', () => {
  it('registers a public client without a secret, and a confidential one whose secret the token endpoint checks', async () => {
    const pub = await registerClient(served.baseUrl);
    expect(pub.client_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(pub).not.toHaveProperty('client_secret');
    expect(pub.token_endpoint_auth_method).toBe('none');

    const confidential = await registerClient(served.baseUrl, { token_endpoint_auth_method: 'client_secret_post' });
    expect(confidential.client_secret).toEqual(expect.any(String));
    const stored = await served.service.ctx.db.sql.all(
      tables.selectFrom('oauth_clients').select('secret_hash').where('id', '=', confidential.client_id),
    );
    expect(stored[0]?.secret_hash).not.toContain(confidential.client_secret);
    const wrong = await tokenRequest(served.baseUrl, {
      grant_type: 'refresh_token',
      refresh_token: 'tsk_ort_x',
      client_id: confidential.client_id,
      client_secret: 'wrong',
    });
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toMatchObject({ error: 'invalid_client' });
    const right = await tokenRequest(served.baseUrl, {
      grant_type: 'refresh_token',
      refresh_token: 'tsk_ort_x',
      client_id: confidential.client_id,
      client_secret: confidential.client_secret ?? '',
    });
    // Authenticated: the refresh token is what is refused now.
    expect(await right.json()).toMatchObject({ error: 'invalid_grant' });
  });

  it.each([
    ['http on a host that is not loopback', ['http://app.example.com/callback']],
    ['a fragment', ['https://app.example.com/callback#x']],
    ['a scheme a browser runs', ['javascript:alert(1)']],
    ['not a URL', ['callback']],
    ['none', []],
    ['more than 10', Array.from({ length: 11 }, (_, i) => `https://app.example.com/${i}`)],
  ])('refuses a redirect URI list with %s: 400 invalid_redirect_uri', async (_what, uris) => {
    const res = await fetch(`${served.baseUrl}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'x', redirect_uris: uris }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: 'invalid_redirect_uri' });
  });

  it('accepts https, loopback http on any host form and a private-use scheme', async () => {
    await registerClient(served.baseUrl, {
      redirect_uris: [
        'https://claude.ai/api/mcp/auth_callback',
        'http://localhost:33418/',
        'http://[::1]:8080/cb',
        'com.example.app:/oauth/callback',
      ],
    });
  });
});

describe('the authorization code flow', () => {
  it('signs in, approves, redirects with code, state and iss, and issues tokens for the service', async () => {
    const user = await registerUser(served.service);
    const { tokens } = await connectApp(served.baseUrl, user, { scope: 'tasks:write tags:read' });
    expect(tokens.scope).toBe('tasks:write tags:read');
    expect(tokens.access_token).toMatch(/^tsk_oat_/);
    expect(tokens.refresh_token).toMatch(/^tsk_ort_/);
    expect(tokens.expires_in).toBe(900);
    const auth = `Bearer ${tokens.access_token}`;
    await served.service.http.post('/tasks').set('Authorization', auth).send({ title: 'From an app' }).expect(201);
    await served.service.http.get('/tasks').set('Authorization', auth).expect(200);
    expect((await mcpInitialize(served.baseUrl, auth)).status).toBe(200);
    // Nothing of it is stored as it is.
    const stored = await countOf(
      served.service.ctx.db.sql,
      tables.selectFrom('oauth_access_tokens').where('token_hash', 'like', 'tsk_%'),
    );
    expect(stored).toBe(0);
  });

  it('puts code, state and iss in the redirect, and error=access_denied when the user denies', async () => {
    const user = await registerUser(served.service);
    const redirectUri = 'https://app.example.com/callback';
    const { client_id: clientId } = await registerClient(served.baseUrl, { redirect_uris: [redirectUri] });
    const url = authorizationUrl(served.baseUrl, {
      clientId,
      redirectUri,
      challenge: pkcePair().challenge,
      state: 's1',
    });
    const approved = redirectedTo((await new BrowserLike(served.baseUrl).authorize(url, user)).answer);
    expect(approved.origin + approved.pathname).toBe(redirectUri);
    expect(approved.searchParams.get('state')).toBe('s1');
    expect(approved.searchParams.get('iss')).toBe(served.baseUrl);
    expect(approved.searchParams.get('code')).toEqual(expect.any(String));

    const denied = redirectedTo((await new BrowserLike(served.baseUrl).authorize(url, user, 'deny')).answer);
    expect(Object.fromEntries(denied.searchParams)).toMatchObject({
      error: 'access_denied',
      state: 's1',
      iss: served.baseUrl,
    });
    expect(denied.searchParams.has('code')).toBe(false);
  });

  it('shows a wrong password on the sign-in page and redirects nowhere', async () => {
    const user = await registerUser(served.service);
    const { client_id: clientId } = await registerClient(served.baseUrl);
    const browser = new BrowserLike(served.baseUrl);
    const page = await browser.open(
      authorizationUrl(served.baseUrl, {
        clientId,
        redirectUri: 'http://127.0.0.1:9/callback',
        challenge: pkcePair().challenge,
      }),
    );
    const { hiddenFieldsOf } = await import('./support/oauth.js');
    const fields = hiddenFieldsOf(await page.text());
    const wrong = await browser.post({ ...fields, step: 'sign_in', email: user.email, password: 'not the password' });
    expect(wrong.status).toBe(200);
    expect(wrong.headers.get('location')).toBeNull();
    expect(await wrong.text()).toContain('The email or the password is wrong');
  });

  it('asks for tasks:read when no scope is asked, and ignores scopes it does not know', async () => {
    const user = await registerUser(served.service);
    expect((await connectApp(served.baseUrl, user)).tokens.scope).toBe('tasks:read');
    expect((await connectApp(served.baseUrl, user, { scope: 'openid profile tags:read' })).tokens.scope).toBe(
      'tags:read',
    );
  });

  it('answers a missing scope with 403 insufficient_scope naming it, and the metadata', async () => {
    const user = await registerUser(served.service);
    const { tokens } = await connectApp(served.baseUrl, user, { scope: 'tasks:read' });
    const res = await served.service.http
      .post('/tasks')
      .set('Authorization', `Bearer ${tokens.access_token}`)
      .send({ title: 'x' });
    expectProblem(res, 403, 'insufficient_scope');
    expect(res.headers['www-authenticate']).toMatch(
      new RegExp(
        `^Bearer error="insufficient_scope", scope="tasks:write", .*resource_metadata="${served.baseUrl}/.well-known/oauth-protected-resource"$`,
      ),
    );
  });

  it('binds a token asked for /mcp to the MCP endpoint: the REST interface refuses it (RFC 8707)', async () => {
    const user = await registerUser(served.service);
    const { tokens } = await connectApp(served.baseUrl, user, {
      scope: 'tasks:write',
      resource: `${served.baseUrl}/mcp`,
    });
    const auth = `Bearer ${tokens.access_token}`;
    expect((await mcpInitialize(served.baseUrl, auth)).status).toBe(200);
    const rest = await served.service.http.get('/tasks').set('Authorization', auth);
    expectProblem(rest, 401, 'unauthenticated');
    expect(rest.body.detail).toMatch(/another resource/);
    expect(rest.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
  });

  it('refreshes with rotation; the app revokes its refresh token and with it the whole grant (RFC 7009)', async () => {
    const user = await registerUser(served.service);
    const { clientId, tokens } = await connectApp(served.baseUrl, user, { scope: 'tasks:read' });
    const refreshed = await tokensFrom(
      await tokenRequest(served.baseUrl, {
        grant_type: 'refresh_token',
        refresh_token: tokens.refresh_token,
        client_id: clientId,
      }),
    );
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    expect(refreshed.scope).toBe('tasks:read');
    await served.service.http.get('/tasks').set('Authorization', `Bearer ${refreshed.access_token}`).expect(200);

    const revoked = await fetch(`${served.baseUrl}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: refreshed.refresh_token, client_id: clientId }).toString(),
    });
    expect(revoked.status).toBe(200);
    expectProblem(
      await served.service.http.get('/tasks').set('Authorization', `Bearer ${refreshed.access_token}`),
      401,
      'unauthenticated',
    );
    const again = await tokenRequest(served.baseUrl, {
      grant_type: 'refresh_token',
      refresh_token: refreshed.refresh_token,
      client_id: clientId,
    });
    expect(await again.json()).toMatchObject({ error: 'invalid_grant' });
  });
});

describe('the user’s grants', () => {
  it('lists the apps a user connected and disconnects one: its tokens are refused at once', async () => {
    const user = await registerUser(served.service);
    const { clientId, tokens } = await connectApp(served.baseUrl, user, { scope: 'tasks:write' });
    const listed = await served.service.http.get('/oauth/grants').set('Authorization', user.auth).expect(200);
    expect(listed.body.items).toEqual([
      expect.objectContaining({ clientId, clientName: 'Test app', scopes: ['tasks:write'], resource: served.baseUrl }),
    ]);
    // Like token management, this needs a login.
    expectProblem(
      await served.service.http.get('/oauth/grants').set('Authorization', `Bearer ${tokens.access_token}`),
      403,
      'forbidden',
    );
    const pat = await createPersonalToken(served.service, user, ['tasks:read']);
    expectProblem(await served.service.http.get('/oauth/grants').set('Authorization', pat.auth), 403, 'forbidden');
    const other = await registerUser(served.service);
    expectProblem(
      await served.service.http.delete(`/oauth/grants/${listed.body.items[0].id}`).set('Authorization', other.auth),
      404,
      'not_found',
    );

    await served.service.http
      .delete(`/oauth/grants/${listed.body.items[0].id}`)
      .set('Authorization', user.auth)
      .expect(204);
    expectProblem(
      await served.service.http.get('/tasks').set('Authorization', `Bearer ${tokens.access_token}`),
      401,
      'unauthenticated',
    );
    const refresh = await tokenRequest(served.baseUrl, {
      grant_type: 'refresh_token',
      refresh_token: tokens.refresh_token,
      client_id: clientId,
    });
    expect(await refresh.json()).toMatchObject({ error: 'invalid_grant' });
    expect(
      (await served.service.http.get('/oauth/grants').set('Authorization', user.auth).expect(200)).body.items,
    ).toEqual([]);
  });

  it('revokes every grant of a user who changes the password', async () => {
    const user = await registerUser(served.service);
    const { tokens } = await connectApp(served.baseUrl, user, { scope: 'tasks:read' });
    await served.service.http
      .patch(`/users/${user.user.id}`)
      .set('Authorization', user.auth)
      .send({ password: 'a brand new password', currentPassword: user.password })
      .expect(200);
    expectProblem(
      await served.service.http.get('/tasks').set('Authorization', `Bearer ${tokens.access_token}`),
      401,
      'unauthenticated',
    );
  });
});

describe('an app’s event stream', () => {
  const streaming = oauthServiceForFile({ EVENT_STREAM_HEARTBEAT_SECONDS: '1' });

  it('stays open through heartbeats while the grant lives, and ends when the user disconnects the app', async () => {
    const user = await registerUser(streaming.service);
    const { tokens } = await connectApp(streaming.baseUrl, user, { scope: 'events:read tasks:read' });
    const sse = await openSse(streaming.baseUrl, { Authorization: `Bearer ${tokens.access_token}` });
    expect(sse.status).toBe(200);
    let ended = false;
    void sse.ended.then(() => (ended = true));
    await sse.until((frames) => frames.filter((f) => f.comment === 'heartbeat').length >= 2, 5_000);
    expect(ended).toBe(false);
    const listed = await streaming.service.http.get('/oauth/grants').set('Authorization', user.auth).expect(200);
    await streaming.service.http
      .delete(`/oauth/grants/${listed.body.items[0].id}`)
      .set('Authorization', user.auth)
      .expect(204);
    await sse.ended;
  });
});

describe('with OAUTH_ENABLED=false', () => {
  const off = oauthServiceForFile({ OAUTH_ENABLED: 'false' });

  it('serves no metadata or OAuth endpoint, names none in its 401s, and refuses app tokens', async () => {
    const user = await registerUser(off.service);
    expect((await fetch(`${off.baseUrl}/.well-known/oauth-authorization-server`)).status).toBe(404);
    expect((await fetch(`${off.baseUrl}/.well-known/oauth-protected-resource/mcp`)).status).toBe(404);
    const register = await fetch(`${off.baseUrl}/oauth/register`, { method: 'POST' });
    expect(register.status).toBe(404);
    const anonymous = await off.service.http.get('/tasks');
    expect(anonymous.headers['www-authenticate']).toBe('Bearer');
    // A live grant's token, written as the token endpoint would have while OAuth was on.
    const token = newAccessToken();
    const [client, grant] = [randomUUID(), randomUUID()];
    const sql = off.service.ctx.db.sql;
    await sql.rows(
      `INSERT INTO oauth_clients (id, name, redirect_uris, metadata, created_at, last_used_at) VALUES ($1, 'app', '{}', '{}', now(), now())`,
      [client],
    );
    await sql.rows(
      `INSERT INTO oauth_grants (id, user_id, client_id, scopes, resource, refresh_token_hash, created_at, last_used_at)
       VALUES ($1, $2, $3, '{tasks:read}', $4, $5, now(), now())`,
      [grant, user.user.id, client, off.service.ctx.config.publicUrl, randomUUID()],
    );
    await sql.rows(
      `INSERT INTO oauth_access_tokens (token_hash, grant_id, scopes, resource, expires_at) VALUES ($1, $2, '{tasks:read}', $3, now() + interval '1 hour')`,
      [hashSecret(token), grant, off.service.ctx.config.publicUrl],
    );
    const app = await off.service.http.get('/tasks').set('Authorization', `Bearer ${token}`);
    expect(expectProblem(app, 401, 'unauthenticated').detail).toMatch(/revoked or unknown/);
    // The user's list stays, to disconnect what was connected before.
    await off.service.http.get('/oauth/grants').set('Authorization', user.auth).expect(200);
  });
});

describe('CORS with CORS_ORIGINS set', () => {
  const cors = oauthServiceForFile({ CORS_ORIGINS: 'https://app.example.test' });

  it('is open on the discovery, registration and token endpoints, and stays as configured elsewhere', async () => {
    const preflight = (path: string) =>
      fetch(`${cors.baseUrl}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://chat.example.com',
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type',
        },
      });
    for (const path of ['/oauth/token', '/oauth/register', '/oauth/revoke']) {
      const res = await preflight(path);
      expect(res.status, path).toBeLessThan(300);
      expect(res.headers.get('access-control-allow-origin'), path).toBe('*');
    }
    const metadata = await fetch(`${cors.baseUrl}/.well-known/oauth-protected-resource/mcp`, {
      headers: { origin: 'https://chat.example.com' },
    });
    expect(metadata.headers.get('access-control-allow-origin')).toBe('*');
    expect((await preflight('/tasks')).headers.get('access-control-allow-origin')).toBeNull();
  });
});
