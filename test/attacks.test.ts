// The weaknesses a black-box attack found, each attacked the way it was found.
import { Writable } from 'node:stream';
import { exportPKCS8, generateKeyPair } from 'jose';
import pg from 'pg';
import { pino } from 'pino';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { pageOf } from '../contract/common.js';
import { TaskSchema } from '../contract/tasks.js';
import { AuthResultSchema } from '../contract/auth.js';
import { buildApp } from '../server/app.js';
import { createContext } from '../server/bootstrap.js';
import { loadConfig } from '../server/config.js';
import type { AppContext } from '../server/context.js';
import { tables } from '../server/db/query.js';
import { openPostgres } from '../server/db/database.js';
import { serviceForFile, startService, type TestService } from './support/app.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { countOf, storedTask } from './support/rows.js';
import { createTask } from './support/tasks.js';
import { login, registerUser, userForFile } from './support/users.js';

const TaskPage = pageOf(TaskSchema);

const service = serviceForFile();
const alice = userForFile(service);

describe('a JSON body in a charset other than UTF-8 (weakness 5)', () => {
  it('answers utf-7 with 415 and stores nothing (+ADw-script+AD4- is not decoded into <script>)', async () => {
    const title = `utf7-${Date.now()}`;
    const res = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .set('Content-Type', 'application/json; charset=utf-7')
      .send(`{"title":"${title} +ADw-script+AD4-"}`);
    expectProblem(res, 415, 'unsupported_media_type', '/tasks');
    expect(await countOf(service.ctx.db.sql, tables.selectFrom('tasks').where('title', 'like', `${title}%`))).toBe(0);
  });

  it('answers utf-16le with 415, on PATCH too', async () => {
    const task = await createTask(service, alice, { title: 'unchanged' });
    const body = Buffer.from(JSON.stringify({ title: 'changed' }), 'utf16le');
    const res = await service.http
      .patch(`/tasks/${task.id}`)
      .set('Authorization', alice.auth)
      .set('Content-Type', 'application/merge-patch+json; charset=utf-16le')
      .send(body);
    expectProblem(res, 415, 'unsupported_media_type');
    const created = await service.http
      .post('/tasks')
      .set('Authorization', alice.auth)
      .set('Content-Type', 'application/json; charset=UTF-16')
      .send(body);
    expectProblem(created, 415, 'unsupported_media_type');
    expect((await storedTask(service.ctx.db.sql, task.id)).title).toBe('unchanged');
  });

  it('takes UTF-8 however it is spelled, and no charset at all', async () => {
    for (const type of [
      'application/json',
      'application/json; charset=utf-8',
      'application/json;charset="UTF-8"',
      'application/json; charset=UTF-8',
    ]) {
      const res = await service.http
        .post('/tasks')
        .set('Authorization', alice.auth)
        .set('Content-Type', type)
        .send(JSON.stringify({ title: 'é ok' }));
      expect(res.status, type).toBe(201);
    }
  });
});

describe('cursors (weakness 4)', () => {
  const forge = (payload: unknown) => Buffer.from(JSON.stringify(payload)).toString('base64url');

  it('answers a forged title cursor holding U+0000 or a lone surrogate with 400, not 500', async () => {
    for (const v of ['\u0000', 'a\ud800', '\udc00z']) {
      const cursor = forge({ s: 'title', v, id: alice.user.id });
      const res = await service.http.get(`/tasks?sort=title&cursor=${cursor}`).set('Authorization', alice.auth);
      expectProblem(res, 400, 'validation_failed', '/tasks');
      expect(errorPaths(res.body)).toEqual(['query.cursor']);
    }
  });

  it('answers an altered cursor with 400, and follows the one it issued', async () => {
    for (let i = 0; i < 3; i++) await createTask(service, alice, { title: `paged ${i}` });
    const first = TaskPage.parse(
      (await service.http.get('/tasks?limit=1').set('Authorization', alice.auth).expect(200)).body,
    );
    const cursor = first.nextCursor ?? '';
    expect(cursor).not.toBe('');
    const next = TaskPage.parse(
      (await service.http.get(`/tasks?limit=1&cursor=${cursor}`).set('Authorization', alice.auth).expect(200)).body,
    );
    expect(next.items[0]?.id).not.toBe(first.items[0]?.id);

    // Same payload with another signature, another payload with this signature, the payload alone.
    const [payload = '', signature = ''] = cursor.split('.');
    // The last character too: it carries padding bits that a lax decoder ignores.
    const flip = (text: string, at: number) =>
      `${text.slice(0, at)}${text[at] === 'A' ? 'B' : 'A'}${text.slice(at + 1)}`;
    const otherPayload = forge({ s: '-createdAt', v: '2000-01-01T00:00:00.000Z', id: alice.user.id });
    for (const altered of [
      `${payload}.${flip(signature, 0)}`,
      `${payload}.${flip(signature, signature.length - 1)}`,
      `${flip(payload, 5)}.${signature}`,
      `${otherPayload}.${signature}`,
      payload,
      `${payload}.`,
    ]) {
      const res = await service.http.get(`/tasks?limit=1&cursor=${altered}`).set('Authorization', alice.auth);
      expectProblem(res, 400, 'validation_failed', '/tasks');
    }
  });

  it('is accepted by another instance with the same signing key, and refused by one with another key', async () => {
    const pem = async () =>
      exportPKCS8((await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true })).privateKey);
    const key = await pem();
    const one = await startService({ JWT_PRIVATE_KEY: key });
    try {
      const user = await registerUser(one);
      for (let i = 0; i < 2; i++) await createTask(one, user, { title: `shared ${i}` });
      const page = TaskPage.parse(
        (await one.http.get('/tasks?limit=1').set('Authorization', user.auth).expect(200)).body,
      );
      const sameKey = request(buildApp(await instanceWithKey(one, key)));
      await sameKey.get(`/tasks?limit=1&cursor=${page.nextCursor}`).set('Authorization', user.auth).expect(200);

      const otherKey = request(buildApp(await instanceWithKey(one, await pem())));
      const session = AuthResultSchema.parse(
        (await otherKey.post('/auth/login').send({ email: user.email, password: user.password }).expect(200)).body,
      );
      const res = await otherKey
        .get(`/tasks?limit=1&cursor=${page.nextCursor}`)
        .set('Authorization', `Bearer ${session.accessToken}`);
      expectProblem(res, 400, 'validation_failed', '/tasks');
    } finally {
      await one.close();
    }
  });
});

/** Another instance on the same database, configured with the signing key `pem`. */
async function instanceWithKey(service: TestService, pem: string): Promise<AppContext> {
  const config = loadConfig({
    DATA_DIR: service.ctx.config.dataDir,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '0',
    JWT_PRIVATE_KEY: pem,
  });
  return createContext(config, service.ctx.db, service.ctx.logger);
}

describe('a revoked access token (weakness 6)', () => {
  it('is charged to its address, so the user’s live session keeps its budget', async () => {
    const limited = await startService({ RATE_LIMIT_PER_MINUTE: '6' });
    try {
      const user = await registerUser(limited);
      const leaked = await login(limited, user.email, user.password);
      await limited.http.post('/auth/logout').set('Authorization', leaked.auth).expect(204);
      for (let i = 0; i < 8; i++) {
        const res = await limited.http.get('/auth/me').set('Authorization', leaked.auth);
        expect([401, 429]).toContain(res.status);
      }
      // The flood after logout went to the address, not to the user's budget.
      const live = await limited.http.get('/auth/me').set('Authorization', user.auth);
      expect(live.status).toBe(200);
      // It did land on the address: an anonymous request from there is over the limit.
      expectProblem(await limited.http.get('/auth/me'), 429, 'rate_limited');
    } finally {
      await limited.close();
    }
  });
});

describe('X-Forwarded-For while TRUST_PROXY is unset (weakness 7)', () => {
  const capture = () => {
    const lines: { level: number; msg: string }[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
        done();
      },
    });
    return { lines, logger: pino({ level: 'warn' }, stream) };
  };

  it('warns once, naming TRUST_PROXY', async () => {
    const { lines, logger } = capture();
    const http = request(buildApp({ ...service.ctx, logger }));
    for (let i = 0; i < 3; i++) await http.get('/healthz').set('X-Forwarded-For', '203.0.113.7').expect(200);
    const warnings = lines.filter((l) => l.msg.includes('TRUST_PROXY'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.level).toBe(40);
  });

  it('does not warn without the header, or when TRUST_PROXY is set', async () => {
    const { lines, logger } = capture();
    await request(buildApp({ ...service.ctx, logger }))
      .get('/healthz')
      .expect(200);
    const trusting = { ...service.ctx, logger, config: { ...service.ctx.config, trustProxy: 1 } };
    await request(buildApp(trusting)).get('/healthz').set('X-Forwarded-For', '203.0.113.7').expect(200);
    expect(lines.filter((l) => l.msg.includes('TRUST_PROXY'))).toHaveLength(0);
  });
});

describe('cursors of long titles', () => {
  it('follows a title-sorted page whose last title is 200 non-ASCII characters', async () => {
    const owner = await registerUser(service);
    for (const last of ['a', 'b']) await createTask(service, owner, { title: `${'€'.repeat(199)}${last}` });
    const first = TaskPage.parse(
      (await service.http.get('/tasks?sort=title&limit=1').set('Authorization', owner.auth).expect(200)).body,
    );
    const second = await service.http
      .get(`/tasks?sort=title&limit=1&cursor=${first.nextCursor}`)
      .set('Authorization', owner.auth);
    expect(second.status).toBe(200);
  });
});

describe('database work past the statement timeout (weakness 3)', () => {
  // Set per transaction where a pooler may be in front, per session on a direct connection.
  it.each([
    ['a pool that may be a pooler', false],
    ['a direct pool', true],
  ])(
    'answers 503 unavailable with Retry-After, and the same request succeeds once the work can finish (%s)',
    async (_, direct) => {
      const url = service.databaseUrl ?? '';
      // A second: short enough to see the locked update cut, long enough that no statement of the
      // retry outlasts it on a loaded two-core machine (300 ms once did, in a run of .ci/run).
      const bounded = openPostgres(url, {
        poolSize: 2,
        statementTimeoutMs: 1_000,
        directUrl: direct ? url : undefined,
      });
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      try {
        const http = request(buildApp({ ...service.ctx, db: bounded }));
        const task = await createTask(service, alice, { title: 'locked' });
        // Another transaction holds the row: the update waits, and the wait is bounded.
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE', [task.id]);
        const started = Date.now();
        const res = await http
          .patch(`/tasks/${task.id}`)
          .set('Authorization', alice.auth)
          .set('Content-Type', 'application/merge-patch+json')
          .send({ title: 'changed' });
        expectProblem(res, 503, 'unavailable', `/tasks/${task.id}`);
        expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
        expect(Date.now() - started).toBeLessThan(5000);
        await holder.query('ROLLBACK');
        expect((await storedTask(service.ctx.db.sql, task.id)).title).toBe('locked');
        await http
          .patch(`/tasks/${task.id}`)
          .set('Authorization', alice.auth)
          .set('Content-Type', 'application/merge-patch+json')
          .send({ title: 'changed' })
          .expect(200);
      } finally {
        await holder.end();
        await bounded.close();
      }
    },
  );
});
