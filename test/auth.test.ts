import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  exportPKCS8,
  exportSPKI,
  generateKeyPair,
  jwtVerify,
  UnsecuredJWT,
} from 'jose';
import { pino } from 'pino';
import type { Response } from 'supertest';
import { v7 as uuidv7 } from 'uuid';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AuthResultSchema } from '../contract/auth.js';
import { UserSchema } from '../contract/users.js';
import { purgeEndedSessions } from '../server/auth/sessions.js';
import { createContext } from '../server/bootstrap.js';
import { tables } from '../server/db/query.js';
import { loadConfig } from '../server/config.js';
import { serviceForFile, startService, type TestService } from './support/app.js';
import { login, loginRequest, registerUser, type TestUser, uniqueEmail } from './support/users.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { countUsersWithEmail } from './support/rows.js';
import { expiredAccessToken, mintAccessToken, type MintOptions } from './support/tokens.js';

const ADMIN_EMAIL = 'Root.Admin@Example.TEST';
const ADMIN_PASSWORD = 'admin password 123';
const PASSWORD = 'correct horse battery';

const service = serviceForFile({ ADMIN_EMAIL, ADMIN_PASSWORD });

function expectUnauthenticated(res: Response) {
  expectProblem(res, 401, 'unauthenticated');
  expect(res.headers['www-authenticate']).toMatch(/^Bearer\b/);
}

const me = (auth: string) => service.http.get('/auth/me').set('Authorization', auth);
const refresh = (refreshToken: string) => service.http.post('/auth/refresh').send({ refreshToken });

describe('POST /auth/register', () => {
  it('creates the account and a session: 201, Location, the auth result', async () => {
    const email = uniqueEmail();
    const res = await service.http.post('/auth/register').send({ email, password: PASSWORD, name: 'Ada' }).expect(201);
    const result = AuthResultSchema.parse(res.body);
    expect(result.user).toMatchObject({ email, name: 'Ada', role: 'user' });
    expect(result.tokenType).toBe('Bearer');
    expect(result.expiresIn).toBe(900);
    expect(res.headers.location).toBe(`/users/${result.user.id}`);
    expect(res.body).not.toHaveProperty('user.passwordHash');
    const fetched = await service.http
      .get(`/users/${result.user.id}`)
      .set('Authorization', `Bearer ${result.accessToken}`)
      .expect(200);
    expect(UserSchema.parse(fetched.body)).toEqual(result.user);
  });

  it('gives refresh tokens of at least 256 bits, different for every session', async () => {
    const a = await registerUser(service);
    const b = await registerUser(service);
    expect(Buffer.from(a.refreshToken, 'base64url').length).toBeGreaterThanOrEqual(32);
    expect(a.refreshToken).not.toBe(b.refreshToken);
  });

  it('stores the email trimmed and in lower case, and answers 409 email_taken for it in another case', async () => {
    const local = `Mixed.Case-${uuidv7().slice(-8)}`;
    const res = await service.http
      .post('/auth/register')
      .send({ email: `  ${local}@Example.TEST `, password: PASSWORD, name: 'Mixed' })
      .expect(201);
    const email = `${local.toLowerCase()}@example.test`;
    expect(AuthResultSchema.parse(res.body).user.email).toBe(email);

    const again = await service.http
      .post('/auth/register')
      .send({ email: email.toUpperCase(), password: PASSWORD, name: 'Other' });
    expectProblem(again, 409, 'email_taken');
    await login(service, `${local}@EXAMPLE.test`, PASSWORD);
  });

  it('lists every validation issue with its path', async () => {
    const res = await service.http.post('/auth/register').send({ email: 'not-an-email', password: 'short', name: '' });
    const problem = expectProblem(res, 400, 'validation_failed');
    const paths = (problem.errors ?? []).map((e) => e.path).sort();
    expect(paths).toEqual(['body.email', 'body.name', 'body.password']);
  });

  it('lists missing fields', async () => {
    const problem = expectProblem(await service.http.post('/auth/register').send({}), 400, 'validation_failed');
    expect((problem.errors ?? []).map((e) => e.path).sort()).toEqual(['body.email', 'body.name', 'body.password']);
  });

  it.each([
    ['role', 'admin'],
    ['id', uuidv7()],
    ['createdAt', '2026-01-01T00:00:00.000Z'],
  ])('rejects the server-owned field %s with 400 and creates nothing', async (field, value) => {
    const email = uniqueEmail();
    const res = await service.http
      .post('/auth/register')
      .send({ email, password: PASSWORD, name: 'Sneaky', [field]: value });
    const problem = expectProblem(res, 400, 'validation_failed');
    expect(problem.errors?.some((e) => e.code === 'unrecognized_keys' && e.message.includes(field))).toBe(true);
    const created = await service.http
      .post('/auth/register')
      .send({ email, password: PASSWORD, name: 'Honest' })
      .expect(201);
    expect(AuthResultSchema.parse(created.body).user.role).toBe('user');
  });

  it.each([
    [7, 400],
    [8, 201],
    [128, 201],
    [129, 400],
  ])('takes a password of %i characters with %i', async (length, status) => {
    const res = await service.http
      .post('/auth/register')
      .send({ email: uniqueEmail(), password: 'p'.repeat(length), name: 'Pat' });
    expect(res.status).toBe(status);
    if (status === 400) expect(errorPaths(res.body)).toEqual(['body.password']);
  });

  it('accepts a password with spaces and no composition rules, and logs in with it', async () => {
    const user = await registerUser(service, { password: 'aaaaaaaa' });
    await login(service, user.email, 'aaaaaaaa');
  });

  it('answers 403 forbidden when self-registration is disabled', async () => {
    const closed = await startService({ REGISTRATION_ENABLED: 'false' });
    try {
      const email = uniqueEmail();
      const res = await closed.http.post('/auth/register').send({ email, password: PASSWORD, name: 'Late' });
      expectProblem(res, 403, 'forbidden');
      expect(await countUsersWithEmail(closed.ctx.db.sql, email)).toBe(0);
    } finally {
      await closed.close();
    }
  });
});

describe('POST /auth/login', () => {
  it('answers 200 with the auth result and a new session', async () => {
    const user = await registerUser(service);
    const result = await login(service, user.email, user.password);
    expect(result.user).toEqual(user.user);
    expect(result.expiresIn).toBe(900);
    expect(decodeJwt(result.accessToken).sid).not.toBe(decodeJwt(user.accessToken).sid);
    expect(result.refreshToken).not.toBe(user.refreshToken);
    await me(result.auth).expect(200);
  });

  it('gives one answer for an unknown email and a wrong password', async () => {
    const user = await registerUser(service);
    const wrongPassword = await loginRequest(service, user.email, 'wrong password');
    const unknownEmail = await loginRequest(service, uniqueEmail('nobody'), 'wrong password');
    const a = expectProblem(wrongPassword, 401, 'invalid_credentials');
    const b = expectProblem(unknownEmail, 401, 'invalid_credentials');
    expect(a.requestId).not.toBe(b.requestId);
    expect({ ...a, requestId: '' }).toEqual({ ...b, requestId: '' });
    expect(wrongPassword.headers['www-authenticate']).toBe(unknownEmail.headers['www-authenticate']);
  });

  it('validates the body', async () => {
    const problem = expectProblem(
      await service.http.post('/auth/login').send({ email: 'x', password: '', remember: true }),
      400,
      'validation_failed',
    );
    expect(problem.errors?.map((e) => e.path)).toEqual(expect.arrayContaining(['body.email', 'body.password']));
  });

  it('logs in the administrator from configuration, created with the admin role', async () => {
    const result = await login(service, ADMIN_EMAIL.toLowerCase(), ADMIN_PASSWORD);
    expect(result.user.email).toBe(ADMIN_EMAIL.toLowerCase());
    expect(result.user.role).toBe('admin');
    expect(decodeJwt(result.accessToken).role).toBe('admin');
    await service.http.get('/users').set('Authorization', result.auth).expect(200);
  });
});

describe('login throttling', () => {
  // Addresses come from X-Forwarded-For here, so one test plays several clients.
  const from = (throttled: TestService, address: string, email: string, password: string) =>
    throttled.http.post('/auth/login').set('X-Forwarded-For', address).send({ email, password });
  const withThrottle = async (env: Record<string, string>, run: (throttled: TestService) => Promise<void>) => {
    const throttled = await startService({ TRUST_PROXY: 'true', ...env });
    try {
      await run(throttled);
    } finally {
      await throttled.close();
    }
  };
  const STRANGER = '198.51.100.66';
  const OWNER = '203.0.113.10';

  it('locks only the (account, address) pair a stranger guesses from: the owner still logs in from theirs', async () => {
    await withThrottle({}, async (throttled) => {
      const user = await registerUser(throttled);
      for (let i = 0; i < 5; i++)
        expectProblem(await from(throttled, STRANGER, user.email, 'wrong password'), 401, 'invalid_credentials');
      const blocked = await from(throttled, STRANGER, user.email, user.password);
      const problem = expectProblem(blocked, 429, 'rate_limited');
      const retryAfter = Number(blocked.headers['retry-after']);
      expect(retryAfter).toBeGreaterThan(800);
      expect(problem.detail).toMatch(
        /for this account from your address; try again in 1[45] minutes \(at \d{4}-\d\d-\d\dT[\d:.]+Z\)/,
      );
      await from(throttled, OWNER, user.email, user.password).expect(200);
      // The stranger's address may still try other accounts.
      const other = await registerUser(throttled);
      await from(throttled, STRANGER, other.email, other.password).expect(200);
    });
  });

  it('throttles an address failing across different emails', async () => {
    await withThrottle({ LOGIN_MAX_FAILURES_PER_ADDRESS: '3' }, async (throttled) => {
      const user = await registerUser(throttled);
      for (let i = 0; i < 3; i++)
        expectProblem(
          await from(throttled, STRANGER, uniqueEmail('guess'), 'wrong password'),
          401,
          'invalid_credentials',
        );
      const problem = expectProblem(await from(throttled, STRANGER, user.email, user.password), 429, 'rate_limited');
      expect(problem.detail).toContain('from your address');
      await from(throttled, OWNER, user.email, user.password).expect(200);
    });
  });

  it('locks an account guessed at from many addresses once its high ceiling is reached', async () => {
    await withThrottle(
      { LOGIN_MAX_FAILURES_PER_ACCOUNT_ADDRESS: '2', LOGIN_MAX_FAILURES_PER_ACCOUNT: '6' },
      async (throttled) => {
        const user = await registerUser(throttled);
        for (const address of ['198.51.100.1', '198.51.100.2', '198.51.100.3']) {
          for (let i = 0; i < 2; i++) await from(throttled, address, user.email, 'wrong password').expect(401);
        }
        const problem = expectProblem(await from(throttled, OWNER, user.email, user.password), 429, 'rate_limited');
        expect(problem.detail).toContain('for this account');
      },
    );
  });

  it('lets simultaneous guesses on a pair through only up to its budget, and gives the other budgets their points back', async () => {
    await withThrottle({ LOGIN_MAX_FAILURES_PER_ADDRESS: '12' }, async (throttled) => {
      const user = await registerUser(throttled);
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => from(throttled, STRANGER, user.email, 'wrong password')),
      );
      expect(answers.map((a) => a.status).sort()).toEqual([
        ...Array<number>(5).fill(401),
        ...Array<number>(5).fill(429),
      ]);
      // The five refused attempts took nothing from the address: seven more failures are left to it.
      for (let i = 0; i < 7; i++) await from(throttled, STRANGER, uniqueEmail('guess'), 'wrong password').expect(401);
      expectProblem(await from(throttled, STRANGER, uniqueEmail('guess'), 'wrong password'), 429, 'rate_limited');
    });
  });

  it('resets the pair after a successful login', async () => {
    await withThrottle({ LOGIN_MAX_FAILURES_PER_ACCOUNT_ADDRESS: '3' }, async (throttled) => {
      const user = await registerUser(throttled);
      for (let round = 0; round < 2; round++) {
        for (let i = 0; i < 2; i++)
          expectProblem(await from(throttled, OWNER, user.email, 'wrong password'), 401, 'invalid_credentials');
        await from(throttled, OWNER, user.email, user.password).expect(200);
      }
      // Control: without a success in between, the third failure does lock the pair.
      for (let i = 0; i < 3; i++) await from(throttled, OWNER, user.email, 'wrong password').expect(401);
      expectProblem(await from(throttled, OWNER, user.email, user.password), 429, 'rate_limited');
    });
  });

  it('answers every successful login with a device token naming the account', async () => {
    const user = await registerUser(service);
    const first = await loginRequest(service, user.email, user.password).expect(200);
    const deviceToken = z.string().min(20).parse(first.body.deviceToken);
    // Sent back, the same device keeps its token; another account's login gets one of its own.
    const again = await service.http
      .post('/auth/login')
      .send({ email: user.email, password: user.password, deviceToken })
      .expect(200);
    expect(z.string().parse(again.body.deviceToken)).toBeTruthy();
    const other = await registerUser(service);
    const others = await loginRequest(service, other.email, other.password).expect(200);
    expect(others.body.deviceToken).not.toBe(deviceToken);
  });

  it("lets the owner's known device log in while strangers hold the account ceiling; a device has its own budget", async () => {
    await withThrottle(
      { LOGIN_MAX_FAILURES_PER_ACCOUNT_ADDRESS: '2', LOGIN_MAX_FAILURES_PER_ACCOUNT: '6' },
      async (throttled) => {
        const user = await registerUser(throttled);
        const known = await from(throttled, OWNER, user.email, user.password).expect(200);
        const deviceToken = z.string().parse(known.body.deviceToken);
        const withDevice = (address: string, password: string, token = deviceToken) =>
          throttled.http
            .post('/auth/login')
            .set('X-Forwarded-For', address)
            .send({ email: user.email, password, deviceToken: token });
        // A crowd of strangers reaches the account's ceiling.
        for (const address of ['198.51.100.1', '198.51.100.2', '198.51.100.3']) {
          for (let i = 0; i < 2; i++) await from(throttled, address, user.email, 'wrong password').expect(401);
        }
        expectProblem(await from(throttled, '203.0.113.99', user.email, user.password), 429, 'rate_limited');
        // The owner's device still logs in, from any address.
        await withDevice('203.0.113.99', user.password).expect(200);
        // A device's failures count against that device only (5 per window), not the address or the account.
        const address = '192.0.2.7';
        for (let i = 0; i < 5; i++)
          expectProblem(await withDevice(address, 'wrong password'), 401, 'invalid_credentials');
        const problem = expectProblem(await withDevice(address, user.password), 429, 'rate_limited');
        expect(problem.detail).toContain('from this device');
        // The address spent nothing: another account logs in from it.
        const other = await registerUser(throttled);
        await from(throttled, address, other.email, other.password).expect(200);
        // A device token of another account, or a forged one, counts as no device token at all.
        const forged = `${deviceToken.slice(0, -2)}${deviceToken.endsWith('AA') ? 'BB' : 'AA'}`;
        const othersToken = z
          .string()
          .parse((await from(throttled, OWNER, other.email, other.password).expect(200)).body.deviceToken);
        for (const token of [forged, othersToken])
          expectProblem(await withDevice('203.0.113.99', user.password, token), 429, 'rate_limited');
      },
    );
  });

  it('refuses an account ceiling below the pair limit at start-up, naming the variable', () => {
    expect(() => loadConfig({ LOGIN_MAX_FAILURES_PER_ACCOUNT: '3' })).toThrow(
      /LOGIN_MAX_FAILURES_PER_ACCOUNT must be at least LOGIN_MAX_FAILURES_PER_ACCOUNT_ADDRESS/,
    );
  });
});

describe('registration throttling', () => {
  it('allows the configured registrations an hour per address, then 429 with Retry-After; other addresses go on', async () => {
    const throttled = await startService({ TRUST_PROXY: 'true', REGISTRATIONS_PER_ADDRESS_PER_HOUR: '3' });
    try {
      const register = (address: string) =>
        throttled.http
          .post('/auth/register')
          .set('X-Forwarded-For', address)
          .send({ email: uniqueEmail(), password: PASSWORD, name: 'New' });
      for (let i = 0; i < 3; i++) await register('198.51.100.20').expect(201);
      const blocked = await register('198.51.100.20');
      const problem = expectProblem(blocked, 429, 'rate_limited');
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(3000);
      expect(problem.detail).toMatch(/try again in \d+ minutes/);
      await register('198.51.100.21').expect(201);
    } finally {
      await throttled.close();
    }
  });
});

describe('POST /auth/refresh', () => {
  it('rotates: a new refresh token each time, and access tokens that work', async () => {
    const user = await registerUser(service);
    const first = AuthResultSchema.parse((await refresh(user.refreshToken).expect(200)).body);
    const second = AuthResultSchema.parse((await refresh(first.refreshToken).expect(200)).body);
    expect(new Set([user.refreshToken, first.refreshToken, second.refreshToken]).size).toBe(3);
    expect(second.user).toEqual(user.user);
    expect(decodeJwt(second.accessToken).sid).toBe(decodeJwt(user.accessToken).sid);
    await me(`Bearer ${second.accessToken}`).expect(200);
  });

  /** Moves the rotation of every rotated-out token of the session `seconds` into the past. */
  const rotatedAgo = async (accessToken: string, seconds: number) => {
    const sessionId = z.string().parse(decodeJwt(accessToken).sid);
    await service.ctx.db.sql.write(
      tables
        .updateTable('rotated_refresh_tokens')
        .set({ rotated_at: new Date(Date.now() - seconds * 1000) })
        .where('session_id', '=', sessionId),
    );
  };

  it('treats an already-rotated token as reuse once the grace has passed: 401, and the whole session is revoked', async () => {
    const user = await registerUser(service);
    const other = await login(service, user.email, user.password);
    const first = AuthResultSchema.parse((await refresh(user.refreshToken).expect(200)).body);
    const newest = AuthResultSchema.parse((await refresh(first.refreshToken).expect(200)).body);
    await me(`Bearer ${newest.accessToken}`).expect(200);
    await rotatedAgo(user.accessToken, service.ctx.config.refreshReuseGraceSeconds + 1);

    expectUnauthenticated(await refresh(user.refreshToken));

    expectUnauthenticated(await refresh(newest.refreshToken));
    expectUnauthenticated(await me(`Bearer ${newest.accessToken}`));
    expectUnauthenticated(await me(user.auth));
    // The user's other session is a different one and lives on.
    await me(other.auth).expect(200);
    await refresh(other.refreshToken).expect(200);
  });

  it('within the reuse grace answers the token just rotated out with a new pair for the same session', async () => {
    const user = await registerUser(service);
    const winner = AuthResultSchema.parse((await refresh(user.refreshToken).expect(200)).body);
    const late = AuthResultSchema.parse((await refresh(user.refreshToken).expect(200)).body);
    expect(decodeJwt(late.accessToken).sid).toBe(decodeJwt(user.accessToken).sid);
    expect(new Set([user.refreshToken, winner.refreshToken, late.refreshToken]).size).toBe(3);
    // Both tabs carry on: each new token refreshes, and the session stays open.
    await refresh(winner.refreshToken).expect(200);
    const last = AuthResultSchema.parse((await refresh(late.refreshToken).expect(200)).body);
    await me(`Bearer ${last.accessToken}`).expect(200);
  });

  it('has no grace when REFRESH_REUSE_GRACE_SECONDS is 0', async () => {
    const strict = await startService({ REFRESH_REUSE_GRACE_SECONDS: '0' });
    try {
      const user = await registerUser(strict);
      const next = AuthResultSchema.parse(
        (await strict.http.post('/auth/refresh').send({ refreshToken: user.refreshToken }).expect(200)).body,
      );
      expectUnauthenticated(await strict.http.post('/auth/refresh').send({ refreshToken: user.refreshToken }));
      expectUnauthenticated(await strict.http.get('/auth/me').set('Authorization', `Bearer ${next.accessToken}`));
    } finally {
      await strict.close();
    }
  });

  it('rejects an unknown refresh token', async () => {
    expectUnauthenticated(await refresh('x'.repeat(43)));
  });

  it('validates the body', async () => {
    const problem = expectProblem(await service.http.post('/auth/refresh').send({}), 400, 'validation_failed');
    expect(problem.errors?.map((e) => e.path)).toEqual(['body.refreshToken']);
  });
});

describe('POST /auth/logout', () => {
  it('revokes that session only: its access and refresh tokens fail, other sessions work', async () => {
    const user = await registerUser(service);
    const other = await login(service, user.email, user.password);

    const res = await service.http.post('/auth/logout').set('Authorization', user.auth).expect(204);
    expect(res.text).toBe('');

    expectUnauthenticated(await me(user.auth));
    expectUnauthenticated(await refresh(user.refreshToken));
    expectUnauthenticated(await service.http.post('/auth/logout').set('Authorization', user.auth));

    await me(other.auth).expect(200);
    await refresh(other.refreshToken).expect(200);
  });

  it('needs a token', async () => {
    expectUnauthenticated(await service.http.post('/auth/logout'));
  });
});

describe('ended sessions', () => {
  it('are purged a day after they end, live ones kept', async () => {
    const revoked = await registerUser(service);
    await service.http.post('/auth/logout').set('Authorization', revoked.auth).expect(204);
    const idle = await registerUser(service);
    const live = await registerUser(service);
    const sessionOf = async (user: TestUser) => {
      const session = await service.ctx.db.sql.first(
        tables.selectFrom('sessions').select('id').where('user_id', '=', user.user.id),
      );
      if (!session) throw new Error(`${user.email} has no session`);
      return session.id;
    };
    const [revokedId, idleId, liveId] = await Promise.all([sessionOf(revoked), sessionOf(idle), sessionOf(live)]);
    const day = 24 * 3600 * 1000;
    await service.ctx.db.sql.write(
      tables
        .updateTable('sessions')
        .set({ revoked_at: new Date(Date.now() - 2 * day) })
        .where('id', '=', revokedId),
    );
    await service.ctx.db.sql.write(
      tables
        .updateTable('sessions')
        .set({ last_used_at: new Date(Date.now() - 32 * day) })
        .where('id', '=', idleId),
    );

    expect(await purgeEndedSessions(service.ctx)).toBeGreaterThanOrEqual(2);
    const left = await service.ctx.db.sql.all(
      tables.selectFrom('sessions').select('id').where('id', 'in', [revokedId, idleId, liveId]),
    );
    expect(left.map((s) => s.id)).toEqual([liveId]);
    // A purged session's tokens are refused like a revoked one's.
    await service.http.post('/auth/refresh').send({ refreshToken: idle.refreshToken }).expect(401);
    await service.http.get('/auth/me').set('Authorization', live.auth).expect(200);
  });
});

describe('GET /auth/me', () => {
  it('answers the caller', async () => {
    const user = await registerUser(service, { name: 'Grace' });
    const res = await me(user.auth).expect(200);
    expect(UserSchema.strict().parse(res.body)).toEqual(user.user);
  });
});

describe('access tokens', () => {
  let user: TestUser;
  beforeAll(async () => {
    user = await registerUser(service);
  });

  const config = () => service.ctx.config.jwt;
  /** A token like the service's own for the user's session, with one thing changed by the caller. */
  const mint = (options: MintOptions = {}) => mintAccessToken(service, user.accessToken, options);

  it('carries the claims and header the design names', async () => {
    const header = decodeProtectedHeader(user.accessToken);
    expect(header).toEqual({ alg: 'EdDSA', typ: 'at+jwt', kid: service.ctx.signingKey.kid });
    const claims = decodeJwt(user.accessToken);
    expect(claims).toEqual({
      iss: config().issuer,
      aud: config().audience,
      sub: user.user.id,
      sid: expect.any(String),
      role: 'user',
      iat: expect.any(Number),
      exp: expect.any(Number),
      jti: expect.any(String),
    });
    expect(claims.exp).toBe((claims.iat ?? 0) + 900);
    expect(z.string().uuid().parse(claims.sid)).toBe(claims.sid);
    expect(claims.jti).not.toBe(decodeJwt((await refresh(user.refreshToken).expect(200)).body.accessToken).jti);
  });

  it('accepts a token minted the way the service mints them (the control for the cases below)', async () => {
    await me(`Bearer ${await mint()}`).expect(200);
  });

  it('rejects a missing Authorization header', async () => {
    expectUnauthenticated(await service.http.get('/auth/me'));
  });

  it.each([
    'Bearer',
    'Bearer ',
    'Basic dXNlcjpwYXNz',
    'bearer-token',
    'Bearer a b',
    'Token abc.def.ghi',
    'Bearer not-a-jwt',
  ])('rejects the malformed header %j', async (value) => {
    expectUnauthenticated(await me(value));
  });

  it('rejects an unsecured token (alg none)', async () => {
    const claims = decodeJwt(user.accessToken);
    const token = new UnsecuredJWT({ sid: claims.sid, role: claims.role })
      .setIssuer(config().issuer)
      .setAudience(config().audience)
      .setSubject(user.user.id)
      .setIssuedAt()
      .setExpirationTime('15m')
      .setJti(uuidv7())
      .encode();
    expect(decodeProtectedHeader(token).alg).toBe('none');
    expectUnauthenticated(await me(`Bearer ${token}`));
    // Same again with an empty signature segment some libraries accept.
    expectUnauthenticated(await me(`Bearer ${token.replace(/\.$/, '.e30')}`));
  });

  it('rejects HS256 tokens keyed with the public key (algorithm confusion)', async () => {
    const spki = await exportSPKI(service.ctx.signingKey.publicKey);
    const x = String(service.ctx.signingKey.publicJwk.x);
    for (const secret of [new TextEncoder().encode(spki), Buffer.from(x, 'base64url'), new TextEncoder().encode(x)]) {
      expectUnauthenticated(await me(`Bearer ${await mint({ alg: 'HS256', key: secret })}`));
    }
  });

  it.each([
    ['a wrong issuer', { iss: 'someone-else' }],
    ['a wrong audience', { aud: 'another-service' }],
    ['a plain JWT type', { typ: 'JWT' }],
    ['an ID token type', { typ: 'id_token+jwt' }],
  ])('rejects %s', async (_what, options) => {
    expectUnauthenticated(await me(`Bearer ${await mint(options)}`));
  });

  it('rejects an expired token', async () => {
    expectUnauthenticated(await me(`Bearer ${await expiredAccessToken(service, user.accessToken)}`));
  });

  it('rejects a token that expires after it was accepted (verified tokens are kept only until their expiry)', async () => {
    const token = await mint({ exp: Math.floor(Date.now() / 1000) + 2 });
    expect((await me(`Bearer ${token}`)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    expectUnauthenticated(await me(`Bearer ${token}`));
  });

  it('rejects a token whose payload was tampered with', async () => {
    const [header, payload, signature] = user.accessToken.split('.');
    const claims: unknown = JSON.parse(Buffer.from(payload ?? '', 'base64url').toString('utf8'));
    const tampered = { ...z.record(z.unknown()).parse(claims), role: 'admin' };
    const forged = [header, Buffer.from(JSON.stringify(tampered)).toString('base64url'), signature].join('.');
    expectUnauthenticated(await me(`Bearer ${forged}`));
    expectUnauthenticated(await service.http.get('/users').set('Authorization', `Bearer ${forged}`));
  });

  it('rejects a token signed by another Ed25519 key, even with the service kid', async () => {
    const { privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    expectUnauthenticated(await me(`Bearer ${await mint({ key: privateKey })}`));
  });

  it('rejects a well-signed token naming a session that does not exist', async () => {
    expectUnauthenticated(await me(`Bearer ${await mint({ sid: uuidv7() })}`));
  });
});

const JwksBodySchema = z.object({
  keys: z.array(
    z
      .object({
        kty: z.literal('OKP'),
        crv: z.literal('Ed25519'),
        x: z.string(),
        kid: z.string(),
        alg: z.literal('EdDSA'),
        use: z.literal('sig'),
      })
      .strict(),
  ),
});

describe('GET /.well-known/jwks.json', () => {
  it('publishes the public key (and nothing private) that verifies issued tokens', async () => {
    const res = await service.http.get('/.well-known/jwks.json').expect(200);
    const jwks = JwksBodySchema.parse(res.body);
    expect(jwks.keys.map((k) => k.kid)).toEqual([service.ctx.signingKey.kid]);
    const user = await registerUser(service);
    const { payload, protectedHeader } = await jwtVerify(user.accessToken, createLocalJWKSet(jwks), {
      issuer: service.ctx.config.jwt.issuer,
      audience: service.ctx.config.jwt.audience,
      typ: 'at+jwt',
      algorithms: ['EdDSA'],
    });
    expect(payload.sub).toBe(user.user.id);
    expect(protectedHeader.kid).toBe(jwks.keys[0]?.kid);
  });
});

describe('the signing key', () => {
  const silent = pino({ level: 'silent' });

  it('is generated once and kept in the database, so every instance and every restart signs with it', async () => {
    const dataDirs = await Promise.all([1, 2].map(() => mkdtemp(path.join(tmpdir(), 'task-service-keys-'))));
    try {
      const [one, two] = await Promise.all(
        dataDirs.map((dir) =>
          createContext(loadConfig({ DATA_DIR: dir, LOG_LEVEL: 'silent' }), service.ctx.db, silent),
        ),
      );
      expect(one?.signingKey.kid).toBe(service.ctx.signingKey.kid);
      expect(two?.signingKey.kid).toBe(service.ctx.signingKey.kid);

      const user = await registerUser(service);
      const claims = decodeJwt(user.accessToken);
      const token = await one!.tokens.issue({ userId: user.user.id, sessionId: String(claims.sid), role: 'user' });
      expect(await two!.tokens.verify(token)).toEqual({
        userId: user.user.id,
        sessionId: claims.sid,
        role: 'user',
        expiresAtMs: expect.any(Number),
      });
      // The private key is not copied to the data directories.
      for (const dir of dataDirs) expect(await readdir(dir)).not.toContain('keys');
    } finally {
      await Promise.all(dataDirs.map((dir) => rm(dir, { recursive: true, force: true })));
    }
  });

  it('adopts the key an earlier version kept in DATA_DIR/keys when the database has none yet', async () => {
    const db = service.ctx.db.sql;
    const [dataDir, otherDir] = await Promise.all([1, 2].map(() => mkdtemp(path.join(tmpdir(), 'task-service-keys-'))));
    const kept = await db.all(tables.selectFrom('signing_keys').selectAll());
    try {
      const { privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
      await mkdir(path.join(dataDir!, 'keys'));
      await writeFile(path.join(dataDir!, 'keys', 'jwt-ed25519.pem'), await exportPKCS8(privateKey), { mode: 0o600 });
      await db.write(tables.deleteFrom('signing_keys'));

      const upgraded = await createContext(
        loadConfig({ DATA_DIR: dataDir!, LOG_LEVEL: 'silent' }),
        service.ctx.db,
        silent,
      );
      const token = await upgraded.tokens.issue({ userId: uuidv7(), sessionId: uuidv7(), role: 'user' });
      const other = await createContext(
        loadConfig({ DATA_DIR: otherDir!, LOG_LEVEL: 'silent' }),
        service.ctx.db,
        silent,
      );
      expect(other.signingKey.kid).toBe(upgraded.signingKey.kid);
      expect(await other.tokens.verify(token)).toBeDefined();
      expect(upgraded.signingKey.kid).not.toBe(service.ctx.signingKey.kid);
    } finally {
      await db.write(tables.deleteFrom('signing_keys'));
      if (kept.length > 0) await db.write(tables.insertInto('signing_keys').values(kept));
      await Promise.all([dataDir, otherDir].map((dir) => rm(dir!, { recursive: true, force: true })));
    }
  });
});

describe('a deleted user', () => {
  it('loses every token at once', async () => {
    const user = await registerUser(service);
    const other = await login(service, user.email, user.password);
    await service.http.delete(`/users/${user.user.id}`).set('Authorization', user.auth).expect(204);
    expectUnauthenticated(await me(user.auth));
    expectUnauthenticated(await me(other.auth));
    expectUnauthenticated(await refresh(other.refreshToken));
    expectProblem(await loginRequest(service, user.email, user.password), 401, 'invalid_credentials');
  });
});

describe('the password hashing cost', () => {
  it("is at least OWASP's minimum for argon2id; the test suite's lower cost is refused outside NODE_ENV=test", async () => {
    const production = loadConfig({});
    expect(production.argon2).toMatchObject({ memoryCost: 19456, timeCost: 2 });
    const cheap = { ARGON2_MEMORY_KIB: '64', ARGON2_TIME_COST: '1' };
    expect(() => loadConfig(cheap)).toThrow(/ARGON2_MEMORY_KIB must be at least 19456 and ARGON2_TIME_COST at least 2/);
    expect(() => loadConfig({ ...cheap, NODE_ENV: 'production' })).toThrow(/ARGON2_MEMORY_KIB/);
    expect(() => loadConfig({ ARGON2_TIME_COST: '1' })).toThrow(/ARGON2_TIME_COST at least 2/);
    expect(loadConfig({ ...cheap, NODE_ENV: 'test' }).argon2).toMatchObject({ memoryCost: 64, timeCost: 1 });
    // A password hashed by the service states its cost, so a login proves which one ran.
    const res = await service.http
      .post('/auth/register')
      .send({ email: uniqueEmail(), password: PASSWORD, name: 'Cost' })
      .expect(201);
    const row = await service.ctx.db.sql.all(
      tables.selectFrom('users').select('password_hash').where('id', '=', res.body.user.id),
    );
    expect(row[0]?.password_hash).toMatch(/^\$argon2id\$v=19\$m=64,t=1,p=1\$/);
  });
});
