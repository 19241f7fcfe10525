// Attacks on the OAuth authorization server, each answered without a redirect to an attacker,
// without a token, or by revoking what a stolen secret could reach: redirect URIs not registered
// or altered, codes replayed or exchanged without the right PKCE verifier, a missing challenge,
// forged consent (CSRF), a /mcp token on the REST interface, a reused refresh token, the admin
// scope asked by a non-admin, and registration floods.
import { describe, expect, it } from 'vitest';
import { tables } from '../server/db/query.js';
import {
  authorizationUrl,
  BrowserLike,
  connectApp,
  hiddenFieldsOf,
  oauthServiceForFile,
  pkcePair,
  redirectedTo,
  registerClient,
  tokenRequest,
  tokensFrom,
} from './support/oauth.js';
import { expectProblem } from './support/problems.js';
import { countOf } from './support/rows.js';
import { registerAdmin, registerUser } from './support/users.js';

describe('attacks on the authorization server', () => {
  // No reuse grace: a rotated-out refresh token presented again is reuse at once.
  const served = oauthServiceForFile({ REFRESH_REUSE_GRACE_SECONDS: '0' });
  const registered = 'https://app.example.com/callback';

  /** Asserts a page answer that sends the browser nowhere. */
  async function expectNoRedirect(res: Response, status = 400): Promise<string> {
    expect(res.status).toBe(status);
    expect(res.headers.get('location')).toBeNull();
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    return res.text();
  }

  it.each([
    ['another host', 'https://evil.example/callback'],
    ['a look-alike host', 'https://app.example.com.evil.example/callback'],
    ['another path', 'https://app.example.com/callback/more'],
    ['a dot segment', 'https://app.example.com/callback/../evil'],
    ['an added query', 'https://app.example.com/callback?next=https://evil.example'],
    ['http instead of https', 'http://app.example.com/callback'],
  ])('never redirects to a redirect URI with %s', async (_what, redirectUri) => {
    const { client_id: clientId } = await registerClient(served.baseUrl, { redirect_uris: [registered] });
    const browser = new BrowserLike(served.baseUrl);
    const page = await expectNoRedirect(
      await browser.open(authorizationUrl(served.baseUrl, { clientId, redirectUri, challenge: pkcePair().challenge })),
    );
    expect(page).toContain('Unregistered return address');
  });

  it('never redirects for an unknown client, nor for a redirect URI altered in the posted form', async () => {
    const unknown = await new BrowserLike(served.baseUrl).open(
      authorizationUrl(served.baseUrl, {
        clientId: '0193a5c9-1a2b-7c3d-8e4f-5a6b7c8d9e0f',
        redirectUri: registered,
        challenge: pkcePair().challenge,
      }),
    );
    expect(await expectNoRedirect(unknown)).toContain('Unknown app');

    const user = await registerUser(served.service);
    const { client_id: clientId } = await registerClient(served.baseUrl, { redirect_uris: [registered] });
    const browser = new BrowserLike(served.baseUrl);
    const page = await browser.open(
      authorizationUrl(served.baseUrl, { clientId, redirectUri: registered, challenge: pkcePair().challenge }),
    );
    const fields = hiddenFieldsOf(await page.text());
    const consent = await browser.post({ ...fields, step: 'sign_in', email: user.email, password: user.password });
    const approval = hiddenFieldsOf(await consent.text());
    await expectNoRedirect(
      await browser.post({ ...approval, step: 'approve', redirect_uri: 'https://evil.example/cb' }),
    );
  });

  it('answers a missing PKCE challenge, or the plain method, with an error at the redirect URI and no code', async () => {
    const { client_id: clientId } = await registerClient(served.baseUrl, { redirect_uris: [registered] });
    const missing = redirectedTo(
      await new BrowserLike(served.baseUrl).open(
        authorizationUrl(served.baseUrl, { clientId, redirectUri: registered }),
      ),
    );
    expect(missing.searchParams.get('error')).toBe('invalid_request');
    expect(missing.searchParams.get('iss')).toBe(served.baseUrl);
    expect(missing.searchParams.has('code')).toBe(false);
    const plainUrl = new URL(
      authorizationUrl(served.baseUrl, { clientId, redirectUri: registered, challenge: 'x'.repeat(43) }),
    );
    plainUrl.searchParams.set('code_challenge_method', 'plain');
    const plain = redirectedTo(await new BrowserLike(served.baseUrl).open(plainUrl.href));
    expect(plain.searchParams.get('error')).toBe('invalid_request');
    expect(plain.searchParams.has('code')).toBe(false);
    // A challenge that is not a SHA-256 (a verifier sent as the challenge, or nothing at all).
    for (const challenge of ['short', 'x'.repeat(44), `${'x'.repeat(42)}=`]) {
      const url = authorizationUrl(served.baseUrl, { clientId, redirectUri: registered, challenge });
      const refused = redirectedTo(await new BrowserLike(served.baseUrl).open(url));
      expect(refused.searchParams.get('error'), challenge).toBe('invalid_request');
    }
  });

  it('answers a resource this server does not serve with invalid_target', async () => {
    const { client_id: clientId } = await registerClient(served.baseUrl, { redirect_uris: [registered] });
    const url = authorizationUrl(served.baseUrl, {
      clientId,
      redirectUri: registered,
      challenge: pkcePair().challenge,
      resource: 'https://other.example/mcp',
    });
    expect(redirectedTo(await new BrowserLike(served.baseUrl).open(url)).searchParams.get('error')).toBe(
      'invalid_target',
    );
  });

  it('refuses a replayed code and revokes the tokens its first use issued', async () => {
    const user = await registerUser(served.service);
    const { clientId, redirectUri, tokens, code, verifier } = await connectApp(served.baseUrl, user, {
      scope: 'tasks:read',
    });
    await served.service.http.get('/tasks').set('Authorization', `Bearer ${tokens.access_token}`).expect(200);
    const replay = await tokenRequest(served.baseUrl, {
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      client_id: clientId,
      redirect_uri: redirectUri,
    });
    expect(replay.status).toBe(400);
    expect(await replay.json()).toMatchObject({ error: 'invalid_grant' });
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
  });

  /** A code approved by `user` for a new client, not yet exchanged. */
  async function approvedCode(user: { email: string; password: string }) {
    const { client_id: clientId } = await registerClient(served.baseUrl, { redirect_uris: [registered] });
    const { verifier, challenge } = pkcePair();
    const url = authorizationUrl(served.baseUrl, { clientId, redirectUri: registered, challenge });
    const { answer } = await new BrowserLike(served.baseUrl).authorize(url, user);
    return { clientId, verifier, code: redirectedTo(answer).searchParams.get('code') ?? '' };
  }

  it('refuses a code with a wrong verifier, without one, or for another client', async () => {
    const user = await registerUser(served.service);
    const { clientId, verifier, code } = await approvedCode(user);
    const exchange = (fields: Record<string, string>) =>
      tokenRequest(served.baseUrl, { grant_type: 'authorization_code', code, redirect_uri: registered, ...fields });
    const wrong = await exchange({ client_id: clientId, code_verifier: pkcePair().verifier });
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toMatchObject({ error: 'invalid_grant' });
    expect((await exchange({ client_id: clientId })).status).toBe(400);
    const other = await registerClient(served.baseUrl, { redirect_uris: [registered] });
    expect(await (await exchange({ client_id: other.client_id, code_verifier: verifier })).json()).toMatchObject({
      error: 'invalid_grant',
    });
    // The code's own client with its verifier: these attempts used nothing up.
    await tokensFrom(await exchange({ client_id: clientId, code_verifier: verifier }));
  });

  it('refuses a consent form posted without this browser’s CSRF token, or with another browser’s approval', async () => {
    const user = await registerUser(served.service);
    const { client_id: clientId } = await registerClient(served.baseUrl, { redirect_uris: [registered] });
    const url = authorizationUrl(served.baseUrl, {
      clientId,
      redirectUri: registered,
      challenge: pkcePair().challenge,
    });
    const victim = new BrowserLike(served.baseUrl);
    const signInFields = hiddenFieldsOf(await (await victim.open(url)).text());
    const consent = await victim.post({ ...signInFields, step: 'sign_in', email: user.email, password: user.password });
    const approval = hiddenFieldsOf(await consent.text());
    expect(approval.ticket).toEqual(expect.any(String));

    // A page elsewhere posting the approval: no cookie comes with it.
    const noCookie = new BrowserLike(served.baseUrl);
    expect(await expectNoRedirect(await noCookie.post({ ...approval, step: 'approve' }), 403)).toContain('expired');
    // The victim's cookie but a guessed token.
    victim.cookie = victim.cookie.replace(/=.*/, `=${'A'.repeat(43)}`);
    await expectNoRedirect(await victim.post({ ...approval, step: 'approve' }), 403);
    // An attacker's own browser (its own cookie and token) with the victim's ticket: the ticket is bound to the victim's browser.
    const attacker = new BrowserLike(served.baseUrl);
    const own = hiddenFieldsOf(await (await attacker.open(url)).text());
    await expectNoRedirect(await attacker.post({ ...approval, csrf_token: own.csrf_token ?? '', step: 'approve' }));
    // A ticket altered by a byte.
    const forged = `${approval.ticket?.slice(0, -1)}${approval.ticket?.endsWith('A') ? 'B' : 'A'}`;
    await expectNoRedirect(await attacker.post({ ...own, ticket: forged, step: 'approve' }));
    // And signing in needs the token too (no login CSRF).
    await expectNoRedirect(
      await noCookie.post({ ...signInFields, step: 'sign_in', email: user.email, password: user.password }),
      403,
    );
  });

  it('refuses a /mcp token on the REST interface, even with a forged tool-call proof', async () => {
    const user = await registerUser(served.service);
    const { tokens } = await connectApp(served.baseUrl, user, {
      scope: 'tasks:read',
      resource: `${served.baseUrl}/mcp`,
    });
    for (const proof of [undefined, 'forged', 'x'.repeat(43)]) {
      const req = served.service.http.get('/tasks').set('Authorization', `Bearer ${tokens.access_token}`);
      const res = await (proof === undefined ? req : req.set('X-MCP-Tool-Call', proof));
      expectProblem(res, 401, 'unauthenticated');
    }
  });

  it('revokes the grant when a rotated-out refresh token comes back', async () => {
    const user = await registerUser(served.service);
    const { clientId, tokens } = await connectApp(served.baseUrl, user, { scope: 'tasks:read' });
    const refresh = (token: string) =>
      tokenRequest(served.baseUrl, { grant_type: 'refresh_token', refresh_token: token, client_id: clientId });
    const rotated = await tokensFrom(await refresh(tokens.refresh_token));
    const reused = await refresh(tokens.refresh_token);
    expect(reused.status).toBe(400);
    expect(await reused.json()).toMatchObject({ error: 'invalid_grant' });
    // The thief's use revoked the grant for whoever holds its current tokens.
    expect(await (await refresh(rotated.refresh_token)).json()).toMatchObject({ error: 'invalid_grant' });
    expectProblem(
      await served.service.http.get('/tasks').set('Authorization', `Bearer ${rotated.access_token}`),
      401,
      'unauthenticated',
    );
  });

  it('drops the admin scope asked for a non-admin, and grants it to an admin', async () => {
    const user = await registerUser(served.service);
    const plain = await connectApp(served.baseUrl, user, { scope: 'admin tasks:read' });
    expect(plain.tokens.scope).toBe('tasks:read');
    expectProblem(
      await served.service.http.get('/users').set('Authorization', `Bearer ${plain.tokens.access_token}`),
      403,
      'insufficient_scope',
    );
    const admin = await registerAdmin(served.service);
    const granted = await connectApp(served.baseUrl, admin, { scope: 'admin tasks:read' });
    expect(granted.tokens.scope.split(' ').sort()).toEqual(['admin', 'tasks:read']);
    await served.service.http.get('/users').set('Authorization', `Bearer ${granted.tokens.access_token}`).expect(200);
    // Demoted, the admin scope no longer works.
    await served.service.ctx.db.sql.rows("UPDATE users SET role = 'user' WHERE id = $1", [admin.user.id]);
    expectProblem(
      await served.service.http.get('/users').set('Authorization', `Bearer ${granted.tokens.access_token}`),
      403,
      'forbidden',
    );
  });
});

describe('registration floods', () => {
  describe('from one address', () => {
    const served = oauthServiceForFile({ OAUTH_REGISTRATIONS_PER_ADDRESS_PER_HOUR: '3' });
    it('are limited per address per hour: 429 after the limit', async () => {
      for (let i = 0; i < 3; i++) await registerClient(served.baseUrl);
      const res = await fetch(`${served.baseUrl}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_name: 'flood', redirect_uris: ['https://app.example.com/cb'] }),
      });
      expect(res.status).toBe(429);
      expect(await res.json()).toMatchObject({ error: 'too_many_requests' });
    });
  });

  describe('from many addresses', () => {
    const served = oauthServiceForFile({ OAUTH_MAX_CLIENTS: '3' });
    it('never register more clients than OAUTH_MAX_CLIENTS, even at once', async () => {
      const answers = await Promise.all(
        Array.from({ length: 8 }, () =>
          fetch(`${served.baseUrl}/oauth/register`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ client_name: 'flood', redirect_uris: ['https://app.example.com/cb'] }),
          }),
        ),
      );
      expect(answers.filter((res) => res.status === 201)).toHaveLength(3);
      for (const refused of answers.filter((res) => res.status !== 201)) {
        expect(refused.status).toBe(400);
        expect(await refused.json()).toMatchObject({ error: 'temporarily_unavailable' });
      }
      expect(await countOf(served.service.ctx.db.sql, tables.selectFrom('oauth_clients'))).toBe(3);
    });
  });
});
