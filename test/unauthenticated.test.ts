import { describe, expect, it } from 'vitest';
import { serviceForFile } from './support/app.js';
import { expectProblem } from './support/problems.js';
import { expiredAccessToken, mintAccessToken } from './support/tokens.js';
import { registerUser } from './support/users.js';

// A 401's detail says which of missing token, expired token or ended session it is, and
// a refused token gets RFC 6750's `error="invalid_token"` challenge with an error_description. Every
// challenge names the protected-resource metadata (RFC 9728), where an app learns how to get a token.
const service = serviceForFile();

/** The default PUBLIC_URL's metadata for the REST interface. */
const RESOURCE_METADATA = 'http://localhost:3000/.well-known/oauth-protected-resource';

const me = (authorization?: string) => {
  const req = service.http.get('/auth/me');
  return authorization === undefined ? req : req.set('Authorization', authorization);
};

/** The challenge's parameters, e.g. `{ error: 'invalid_token', error_description: '…' }`. */
function challenge(header: unknown): Record<string, string> {
  expect(typeof header).toBe('string');
  const value = String(header);
  expect(value).toMatch(/^Bearer\b/);
  // RFC 6750 §3: a description is %x20-21 / %x23-5B / %x5D-7E (no quote, no backslash).
  return Object.fromEntries(
    [...value.matchAll(/(\w+)="([\x20\x21\x23-\x5b\x5d-\x7e]*)"/g)].map((m) => [m[1] ?? '', m[2] ?? '']),
  );
}

describe('401 unauthenticated says why', () => {
  it('no token: detail says a token is required; a bare Bearer challenge without error', async () => {
    const res = await me();
    const problem = expectProblem(res, 401, 'unauthenticated');
    expect(problem.detail).toMatch(/access token is required/i);
    expect(res.headers['www-authenticate']).toBe(`Bearer resource_metadata="${RESOURCE_METADATA}"`);
  });

  it('another scheme (Basic) counts as no bearer token', async () => {
    const res = await me('Basic dXNlcjpwYXNz');
    expect(expectProblem(res, 401, 'unauthenticated').detail).toMatch(/required/i);
    expect(res.headers['www-authenticate']).toBe(`Bearer resource_metadata="${RESOURCE_METADATA}"`);
  });

  it('an expired token: detail and error_description say expired, so the client refreshes', async () => {
    const user = await registerUser(service);
    const res = await me(`Bearer ${await expiredAccessToken(service, user.accessToken)}`);
    const problem = expectProblem(res, 401, 'unauthenticated');
    expect(problem.detail).toMatch(/expired/i);
    expect(challenge(res.headers['www-authenticate'])).toEqual({
      error: 'invalid_token',
      error_description: problem.detail,
      resource_metadata: RESOURCE_METADATA,
    });
  });

  it('a logged-out session: detail and error_description say the session ended', async () => {
    const user = await registerUser(service);
    expect((await service.http.post('/auth/logout').set('Authorization', `Bearer ${user.accessToken}`)).status).toBe(
      204,
    );
    const res = await me(`Bearer ${user.accessToken}`);
    const problem = expectProblem(res, 401, 'unauthenticated');
    expect(problem.detail).toMatch(/session has ended/i);
    expect(challenge(res.headers['www-authenticate'])).toEqual({
      error: 'invalid_token',
      error_description: problem.detail,
      resource_metadata: RESOURCE_METADATA,
    });
  });

  it('a malformed, a wrongly signed and an empty bearer token are invalid_token, not "expired"', async () => {
    const user = await registerUser(service);
    const forged = await mintAccessToken(service, user.accessToken, { iss: 'someone-else' });
    for (const authorization of ['Bearer not-a-jwt', `Bearer ${forged}`, 'Bearer ', 'Bearer a b']) {
      const res = await me(authorization);
      const problem = expectProblem(res, 401, 'unauthenticated');
      expect(problem.detail, authorization).toMatch(/malformed or not signed/i);
      expect(challenge(res.headers['www-authenticate'])).toEqual({
        error: 'invalid_token',
        error_description: problem.detail,
        resource_metadata: RESOURCE_METADATA,
      });
    }
  });

  it('an expired token that is also forged is invalid, not expired', async () => {
    const user = await registerUser(service);
    const now = Math.floor(Date.now() / 1000);
    const forged = await mintAccessToken(service, user.accessToken, {
      aud: 'elsewhere',
      iat: now - 1000,
      exp: now - 100,
    });
    expect(expectProblem(await me(`Bearer ${forged}`), 401, 'unauthenticated').detail).toMatch(
      /malformed or not signed/i,
    );
  });
});
