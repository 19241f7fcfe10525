import type { Express } from 'express';
import request, { type Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProblemSchema, type ProblemCode } from '../contract/common.js';
import { HealthSchema, ReadinessSchema } from '../contract/service.js';
import { buildApp } from '../server/app.js';
import { loginThrottle } from '../server/security/throttle.js';
import type { AppContext } from '../server/context.js';
import { loadConfig } from '../server/config.js';
import { openPostgres, type Database } from '../server/db/database.js';
import { serviceForFile } from './support/app.js';
import { freshDatabase } from './support/databases.js';
import { uniqueEmail, userForFile } from './support/users.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { countUsersWithEmail } from './support/rows.js';

const METRICS_TOKEN = 'a-scrape-token-of-at-least-32-characters';

const service = serviceForFile();
const user = userForFile(service);

describe('problem details', () => {
  const cases: [string, () => Promise<Response>, number, ProblemCode, string][] = [
    ['an unknown path', () => service.http.get('/no/such/thing'), 404, 'not_found', '/no/such/thing'],
    ['a missing token', () => service.http.get('/auth/me'), 401, 'unauthenticated', '/auth/me'],
    ['a validation failure', () => service.http.post('/auth/login').send({}), 400, 'validation_failed', '/auth/login'],
    [
      'a malformed path id',
      () => service.http.get('/users/not-a-uuid').set('Authorization', user.auth),
      400,
      'validation_failed',
      '/users/not-a-uuid',
    ],
    ['a wrong method', () => service.http.delete('/auth/me'), 405, 'method_not_allowed', '/auth/me'],
  ];

  it.each(cases)('answers %s with problem+json', async (_what, send, status, code, instance) => {
    expectProblem(await send(), status, code, instance);
  });

  it('leaves the query string out of instance', async () => {
    expectProblem(await service.http.get('/no/such/thing?token=secret'), 404, 'not_found', '/no/such/thing');
  });

  it('lists the issues of a validation failure with their location', async () => {
    const res = await service.http.get('/users/not-a-uuid').set('Authorization', user.auth);
    const problem = expectProblem(res, 400, 'validation_failed', '/users/not-a-uuid');
    expect(problem.errors?.map((e) => e.path)).toEqual(['path.user_id']);
  });
});

describe('X-Request-Id', () => {
  it('echoes a well-formed incoming id, on success and on error', async () => {
    const ok = await service.http.get('/healthz').set('X-Request-Id', 'req-123.abc:def_1').expect(200);
    expect(ok.headers['x-request-id']).toBe('req-123.abc:def_1');
    const failed = await service.http.get('/nowhere').set('X-Request-Id', 'req-456');
    expect(failed.headers['x-request-id']).toBe('req-456');
    expect(ProblemSchema.parse(failed.body).requestId).toBe('req-456');
  });

  it.each([
    ['too long', 'a'.repeat(300)],
    ['with spaces', 'two words'],
    ['with a header-injection attempt', 'abc%0d%0aSet-Cookie:x'],
  ])('replaces an id that is %s', async (_what, incoming) => {
    const res = await service.http.get('/healthz').set('X-Request-Id', incoming).expect(200);
    const id = res.headers['x-request-id'];
    expect(id).not.toBe(incoming);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('generates a distinct id for every request without one', async () => {
    const a = await service.http.get('/healthz').expect(200);
    const b = await service.http.get('/no/such/thing');
    expect(a.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(b.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.headers['x-request-id']).not.toBe(b.headers['x-request-id']);
  });
});

describe('routing', () => {
  it('answers 404 not_found for an unknown path, with or without a token', async () => {
    expectProblem(await service.http.get('/nope'), 404, 'not_found', '/nope');
    expectProblem(await service.http.post('/auth/nope').send({}), 404, 'not_found', '/auth/nope');
    expectProblem(await service.http.get('/nope').set('Authorization', user.auth), 404, 'not_found', '/nope');
  });

  const id = '0190a6d4-0000-7000-8000-000000000001';
  it.each([
    ['DELETE /auth/me', () => service.http.delete('/auth/me'), '/auth/me', ['GET', 'HEAD']],
    ['PUT /auth/login', () => service.http.put('/auth/login'), '/auth/login', ['POST']],
    ['GET /auth/logout', () => service.http.get('/auth/logout'), '/auth/logout', ['POST']],
    ['POST /healthz', () => service.http.post('/healthz'), '/healthz', ['GET', 'HEAD']],
    ['PATCH /users', () => service.http.patch('/users'), '/users', ['GET', 'HEAD', 'POST']],
    [
      'POST /users/{id}',
      () => service.http.post(`/users/${id}`),
      `/users/${id}`,
      ['DELETE', 'GET', 'HEAD', 'PATCH', 'PUT'],
    ],
  ])('answers %s with 405 and Allow', async (_what, send, path, allowed) => {
    const res = await send();
    expectProblem(res, 405, 'method_not_allowed', path);
    expect(String(res.headers.allow).split(/,\s*/).sort()).toEqual(allowed);
  });
});

describe('request bodies', () => {
  it('answers malformed JSON with 400 malformed_json', async () => {
    const res = await service.http
      .post('/auth/login')
      .set('Content-Type', 'application/json')
      .send('{"email": "a@b.test",');
    expectProblem(res, 400, 'malformed_json', '/auth/login');
  });

  it('answers a text/plain body with 415 unsupported_media_type', async () => {
    const email = uniqueEmail();
    const res = await service.http
      .post('/auth/register')
      .set('Content-Type', 'text/plain')
      .send(JSON.stringify({ email, password: 'correct horse battery', name: 'Plain' }));
    expectProblem(res, 415, 'unsupported_media_type', '/auth/register');
    expect(await countUsersWithEmail(service.ctx.db.sql, email)).toBe(0);
  });

  it('answers a form-encoded body with 415', async () => {
    const res = await service.http
      .post('/auth/login')
      .type('form')
      .send({ email: user.email, password: user.password });
    expectProblem(res, 415, 'unsupported_media_type', '/auth/login');
  });

  it('takes application/merge-patch+json on PATCH only', async () => {
    const res = await service.http
      .post('/auth/login')
      .set('Content-Type', 'application/merge-patch+json')
      .send(JSON.stringify({ email: user.email, password: user.password }));
    expectProblem(res, 415, 'unsupported_media_type', '/auth/login');
  });

  it('rejects text the database cannot store (NUL) with 400, naming the field', async () => {
    const res = await service.http
      .post('/auth/register')
      .send({ email: uniqueEmail(), password: 'correct horse battery', name: 'Nul\u0000Name' });
    expectProblem(res, 400, 'validation_failed', '/auth/register');
    expect(errorPaths(res.body)).toEqual(['body.name']);
  });

  it('accepts JSON with a charset parameter', async () => {
    await service.http
      .post('/auth/login')
      .set('Content-Type', 'application/json; charset=utf-8')
      .send(JSON.stringify({ email: user.email, password: user.password }))
      .expect(200);
  });

  it('answers a JSON body over 1 MiB with 413 payload_too_large', async () => {
    const body = (size: number) => {
      const frame = JSON.stringify({ email: user.email, password: user.password, name: '' });
      return frame.replace('"name":""', `"name":"${'x'.repeat(size - frame.length)}"`);
    };
    const over = body(1024 * 1024 + 1);
    expect(Buffer.byteLength(over)).toBe(1024 * 1024 + 1);
    expectProblem(
      await service.http.post('/auth/login').set('Content-Type', 'application/json').send(over),
      413,
      'payload_too_large',
      '/auth/login',
    );
    // Exactly 1 MiB is read, and then fails on its content instead.
    const limit = body(1024 * 1024);
    expect(Buffer.byteLength(limit)).toBe(1024 * 1024);
    expectProblem(
      await service.http.post('/auth/login').set('Content-Type', 'application/json').send(limit),
      400,
      'validation_failed',
      '/auth/login',
    );
  });
});

describe('general rate limit', () => {
  const limited = serviceForFile({ RATE_LIMIT_PER_MINUTE: '3', METRICS_TOKEN });
  // Registration is anonymous: these two use up two of this address's three requests.
  const alice = userForFile(limited);
  const bob = userForFile(limited);

  it('counts per user, with RateLimit headers, then 429 with Retry-After', async () => {
    for (const remaining of [2, 1, 0]) {
      const res = await limited.http.get('/auth/me').set('Authorization', alice.auth).expect(200);
      expect(res.headers['ratelimit-policy']).toBe('"default";q=3;w=60');
      expect(res.headers.ratelimit).toMatch(new RegExp(`^"default";r=${remaining};t=\\d+$`));
    }
    const res = await limited.http.get('/auth/me').set('Authorization', alice.auth);
    expectProblem(res, 429, 'rate_limited', '/auth/me');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(res.headers.ratelimit).toMatch(/^"default";r=0;t=\d+$/);
    // Bob has his own budget.
    await limited.http.get('/auth/me').set('Authorization', bob.auth).expect(200);
  });

  it('counts anonymous requests per address', async () => {
    const first = await limited.http.get('/openapi.json').expect(200);
    expect(first.headers.ratelimit).toMatch(/^"default";r=0;t=\d+$/);
    const res = await limited.http.get('/openapi.json');
    expectProblem(res, 429, 'rate_limited', '/openapi.json');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('never limits the probes and /metrics, and they spend no budget', async () => {
    // This address and Alice have spent their budgets above; Bob has two requests left.
    await limited.http.get('/openapi.json').expect(429);
    await limited.http.get('/auth/me').set('Authorization', alice.auth).expect(429);
    const probes: [string, Record<string, string>, number][] = [
      ['/healthz', {}, 200],
      ['/readyz', {}, 200],
      ['/metrics', { Authorization: `Bearer ${METRICS_TOKEN}` }, 200],
      ['/healthz', { Authorization: alice.auth }, 200],
      ['/metrics', { Authorization: bob.auth }, 403],
      ['/readyz', { Authorization: bob.auth }, 200],
      ['/healthz', { Authorization: bob.auth }, 200],
    ];
    for (const [path, headers, status] of probes) {
      const res = await limited.http.get(path).set(headers);
      expect(res.status, path).toBe(status);
      expect(res.headers.ratelimit, path).toBeUndefined();
    }
    for (const remaining of [1, 0]) {
      const res = await limited.http.get('/auth/me').set('Authorization', bob.auth).expect(200);
      expect(res.headers.ratelimit).toMatch(new RegExp(`^"default";r=${remaining};t=\\d+$`));
    }
  });
});

describe('rate limit before authentication', () => {
  const limited = serviceForFile({ RATE_LIMIT_PER_MINUTE: '2' });

  it('counts requests with a bad token and unknown paths against the address', async () => {
    await limited.http.get('/auth/me').set('Authorization', 'Bearer not.a.token').expect(401);
    await limited.http.get('/no/such/path').expect(404);
    const res = await limited.http.get('/auth/me').set('Authorization', 'Bearer not.a.token');
    expectProblem(res, 429, 'rate_limited', '/auth/me');
  });
});

describe('service endpoints', () => {
  it('GET /healthz answers 200', async () => {
    const res = await service.http.get('/healthz').expect(200);
    expect(HealthSchema.parse(res.body)).toEqual({ status: 'ok' });
  });

  it('GET /readyz answers 200 with no pending migrations', async () => {
    const res = await service.http.get('/readyz').expect(200);
    expect(ReadinessSchema.parse(res.body)).toEqual({ status: 'ready', database: 'up', pendingMigrations: [] });
  });
});

/** The service's context on another database handle (createContext would read the signing key from it). */
const onDatabase = (db: Database): AppContext => ({
  ...service.ctx,
  db,
  loginThrottle: loginThrottle(db.sql, service.ctx.config.loginThrottle),
});

describe('with the database gone', () => {
  let gone: Express;
  let refused: Express;
  const unreachable = openPostgres('postgresql://postgres:postgres@127.0.0.1:1/none', { poolSize: 1 });
  afterAll(() => unreachable.close());
  beforeAll(async () => {
    // The service's handles closed under it, as at shutdown (a dropped database closes its handle).
    const closed = await freshDatabase();
    await closed.drop();
    gone = buildApp(onDatabase(closed.db));
    // A PostgreSQL server that refuses connections (nothing listens on port 1).
    refused = buildApp(onDatabase(unreachable));
  });

  it.each([
    ['closed', () => gone],
    ['refusing connections', () => refused],
  ])('answers 503 unavailable with Retry-After and no internals when it is %s', async (_what, app) => {
    const res = await request(app()).get('/auth/me').set('Authorization', user.auth);
    expectProblem(res, 503, 'unavailable', '/auth/me');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    const login = await request(app()).post('/auth/login').send({ email: user.email, password: user.password });
    expectProblem(login, 503, 'unavailable', '/auth/login');
  });

  it('GET /readyz answers 503 with the database down', async () => {
    const res = await request(gone).get('/readyz').expect(503);
    expect(ReadinessSchema.parse(res.body)).toEqual({ status: 'unavailable', database: 'down', pendingMigrations: [] });
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('still answers GET /healthz, the process being alive', async () => {
    await request(gone).get('/healthz').expect(200);
  });
});

describe('CORS', () => {
  const open = serviceForFile({ CORS_ORIGINS: 'https://app.example.test, https://admin.example.test/' });

  it('answers a preflight from an allowed origin', async () => {
    const res = await open.http
      .options('/tasks')
      .set('Origin', 'https://admin.example.test')
      .set('Access-Control-Request-Method', 'PATCH')
      .set('Access-Control-Request-Headers', 'authorization, content-type, if-match')
      .expect(204);
    expect(res.headers['access-control-allow-origin']).toBe('https://admin.example.test');
    expect(res.headers['access-control-allow-methods']).toContain('PATCH');
    expect(res.headers['access-control-allow-headers']).toContain('If-Match');
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
  });

  it('exposes the headers a client reads, and says nothing to other origins', async () => {
    const allowed = await open.http.get('/healthz').set('Origin', 'https://app.example.test').expect(200);
    expect(allowed.headers['access-control-allow-origin']).toBe('https://app.example.test');
    expect(allowed.headers['access-control-expose-headers']).toContain('ETag');
    expect(allowed.headers['access-control-expose-headers']).toContain('Link');
    const other = await open.http.get('/healthz').set('Origin', 'https://evil.example.test').expect(200);
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('allows the request headers a browser client sends and exposes the answer headers it reads (CORS)', async () => {
    const requested = [
      'Authorization',
      'Content-Type',
      'If-Match',
      'If-None-Match',
      'Idempotency-Key',
      'Last-Event-ID',
      'X-Request-Id',
    ];
    const preflight = await open.http
      .options('/tasks')
      .set('Origin', 'https://app.example.test')
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', requested.join(', ').toLowerCase())
      .expect(204);
    const allowed = String(preflight.headers['access-control-allow-headers'])
      .toLowerCase()
      .split(/\s*,\s*/);
    for (const name of requested) expect(allowed).toContain(name.toLowerCase());
    const res = await open.http.get('/healthz').set('Origin', 'https://app.example.test').expect(200);
    const exposed = String(res.headers['access-control-expose-headers'])
      .toLowerCase()
      .split(/\s*,\s*/);
    const answers = [
      'ETag',
      'Location',
      'Link',
      'RateLimit',
      'RateLimit-Policy',
      'Retry-After',
      'Idempotent-Replayed',
      'X-Request-Id',
      'WWW-Authenticate',
    ];
    for (const name of answers) expect(exposed).toContain(name.toLowerCase());
  });

  it('is off unless configured', async () => {
    const res = await service.http.get('/healthz').set('Origin', 'https://app.example.test').expect(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('refuses a malformed origin in the configuration', () => {
    expect(() => loadConfig({ CORS_ORIGINS: 'not a url' })).toThrow(/CORS_ORIGINS/);
  });
});
