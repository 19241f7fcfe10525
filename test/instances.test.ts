import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../server/app.js';
import { AttachmentSchema } from '../contract/attachments.js';
import { closeContext, createContext } from '../server/bootstrap.js';
import { loadConfig } from '../server/config.js';
import { underLease } from '../server/db/leases.js';
import { runMaintenance } from '../server/maintenance.js';
import { pgSql } from '../server/db/sql.js';
import { migrate, pendingMigrations, readMigrations } from '../server/db/migrate.js';
import { tables } from '../server/db/query.js';
import type { TestService } from './support/app.js';
import { binary } from './support/binary.js';
import { freshDatabase, openTestDatabase, postgresUrl, serviceUrl, type TestDatabase } from './support/databases.js';
import { startObjectStore, type TestObjectStore } from './support/object-store.js';
import { countOf, storageKeyOf } from './support/rows.js';
import { createTask } from './support/tasks.js';
import { registerUser } from './support/users.js';
import { listenOnLoopback } from './support/loopback.js';

// Several instances of the service on one PostgreSQL database: the production set-up.
describe('several instances on one PostgreSQL database', () => {
  it('apply each migration once when they start together', async () => {
    const admin = postgresUrl();
    const name = `task_service_race_${randomUUID().replace(/-/g, '')}`;
    const client = new pg.Client({ connectionString: admin });
    await client.connect();
    await client.query(`CREATE DATABASE ${name}`);
    const url = serviceUrl(name);
    const pools = [1, 2, 3].map(() => new pg.Pool({ connectionString: url, max: 1 }));
    // DROP … WITH (FORCE) below may reach a connection pg is still closing; that is no error of the migrator.
    for (const pool of pools) pool.on('error', () => undefined);
    try {
      const results = await Promise.all(pools.map((pool) => migrate(pgSql(pool))));
      const all = (await readMigrations()).map((m) => m.name);
      expect(results.flat().sort()).toEqual(all.sort());
      expect(await pendingMigrations(pgSql(pools[0]!), await readMigrations())).toEqual([]);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    }
  });

  describe('two instances on separate ports, one database, one object store', () => {
    let database: TestDatabase;
    let objectStore: TestObjectStore;
    const opened: Instance[] = [];
    let a: Instance;
    let b: Instance;

    /** Two instances on one database, each with its own DATA_DIR and its own port, started together. */
    async function twoInstances(env: Record<string, string>): Promise<[Instance, Instance]> {
      const [one, two] = await Promise.all(
        [1, 2].map(() => startInstance(database.url, { ...objectStore.env, ...env })),
      );
      opened.push(one!, two!);
      return [one!, two!];
    }

    beforeAll(async () => {
      database = await freshDatabase();
      objectStore = await startObjectStore();
      // No JWT_PRIVATE_KEY: the generated key must be one for both.
      [a, b] = await twoInstances({ RATE_LIMIT_PER_MINUTE: '0', LOGIN_MAX_FAILURES_PER_ACCOUNT_ADDRESS: '2' });
    });
    afterAll(async () => {
      await Promise.all(opened.map((instance) => instance.close()));
      await objectStore.close();
      await database.drop();
    });

    it('start together with one generated signing key, and keep no bytes of their own', async () => {
      expect(a.baseUrl).not.toBe(b.baseUrl);
      expect(a.ctx.signingKey.kid).toBe(b.ctx.signingKey.kid);
      expect(await countOf(database.db.sql, tables.selectFrom('signing_keys'))).toBe(1);
      const jwks = await b.http.get('/.well-known/jwks.json').expect(200);
      expect(jwks.body.keys.map((k: { kid: string }) => k.kid)).toEqual([a.ctx.signingKey.kid]);
    });

    it('serve through B what was uploaded through A, whole and in ranges', async () => {
      const alice = await registerUser(a);
      const task = await createTask(a, alice);
      // Over one multipart part, so the object store receives a multipart upload.
      const bytes = randomBytes(6 * 1024 * 1024 + 321);
      const uploaded = await a.http
        .post(`/tasks/${task.id}/attachments`)
        .set('Authorization', alice.auth)
        .attach('file', bytes, 'big.bin')
        .expect(201);
      const attachment = AttachmentSchema.parse(uploaded.body);
      expect(attachment).toMatchObject({
        size: bytes.length,
        sha256: createHash('sha256').update(bytes).digest('hex'),
      });

      const whole = await b.http
        .get(`/attachments/${attachment.id}/content`)
        .set('Authorization', alice.auth)
        .buffer(true)
        .parse(binary)
        .expect(200);
      expect(Buffer.compare(whole.body, bytes)).toBe(0);
      const part = await b.http
        .get(`/attachments/${attachment.id}/content`)
        .set('Authorization', alice.auth)
        .set('Range', 'bytes=5242870-5242889')
        .buffer(true)
        .parse(binary)
        .expect(206);
      expect(part.headers['content-range']).toBe(`bytes 5242870-5242889/${bytes.length}`);
      expect(Buffer.compare(part.body, bytes.subarray(5242870, 5242890))).toBe(0);

      // The bytes are in the bucket, not in either data directory.
      const key = await storageKeyOf(database.db.sql, attachment.id);
      expect(await storedKeys(b)).toContain(key);
      for (const instance of [a, b]) expect(await readdir(instance.ctx.config.dataDir)).not.toContain('attachments');
    });

    it('remove the object from the store when B deletes an attachment, a task or a user', async () => {
      const alice = await registerUser(a);
      const task = await createTask(a, alice);
      const upload = async (taskId: string) => {
        const res = await a.http
          .post(`/tasks/${taskId}/attachments`)
          .set('Authorization', alice.auth)
          .attach('file', Buffer.from(`bytes of ${randomUUID()}`), 'a.txt')
          .expect(201);
        const { id } = AttachmentSchema.parse(res.body);
        return { id, key: await storageKeyOf(database.db.sql, id) };
      };
      const single = await upload(task.id);
      const ofTask = await upload(task.id);
      const ofUser = await upload((await createTask(a, alice)).id);
      expect(await storedKeys(a)).toEqual(expect.arrayContaining([single.key, ofTask.key, ofUser.key]));

      await b.http.delete(`/attachments/${single.id}`).set('Authorization', alice.auth).expect(204);
      expect(await storedKeys(a)).not.toContain(single.key);
      await a.http.get(`/attachments/${single.id}/content`).set('Authorization', alice.auth).expect(404);

      await b.http.delete(`/tasks/${task.id}`).set('Authorization', alice.auth).expect(204);
      expect(await storedKeys(a)).not.toContain(ofTask.key);

      await b.http.delete(`/users/${alice.user.id}`).set('Authorization', alice.auth).expect(204);
      expect(await storedKeys(a)).not.toContain(ofUser.key);
    });

    it('honour a logout on A at once on B', async () => {
      const reg = await registerUser(a);
      await b.http.get('/auth/me').set('Authorization', reg.auth).expect(200);
      await a.http.post('/auth/logout').set('Authorization', reg.auth).expect(204);
      await b.http.get('/auth/me').set('Authorization', reg.auth).expect(401);
      await b.http.post('/auth/refresh').send({ refreshToken: reg.refreshToken }).expect(401);
    });

    it('count failed logins across instances', async () => {
      const target = await registerUser(a);
      await a.http.post('/auth/login').send({ email: target.email, password: 'wrong password' }).expect(401);
      await b.http.post('/auth/login').send({ email: target.email, password: 'wrong password' }).expect(401);
      const blocked = await a.http
        .post('/auth/login')
        .send({ email: target.email, password: target.password })
        .expect(429);
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
      await b.http.post('/auth/login').send({ email: target.email, password: target.password }).expect(429);
    });

    it('run housekeeping on one instance at a time', async () => {
      let inside = 0;
      let most = 0;
      let settled = 0;
      // The job that runs holds the lease until the others have answered (or 3 s pass, if two run).
      let poll: NodeJS.Timeout | undefined;
      const othersAnswered = new Promise<void>((resolve) => {
        poll = setInterval(() => settled >= 3 && resolve(), 10);
        setTimeout(resolve, 3_000);
      }).finally(() => clearInterval(poll));
      const job = async () => {
        most = Math.max(most, ++inside);
        await othersAnswered;
        inside--;
      };
      const outcomes = await Promise.all(
        [a, b, a, b].map((instance) =>
          underLease(instance.ctx.db.sql, 'test job', 60_000, job).finally(() => settled++),
        ),
      );
      expect(outcomes.filter((o) => o.ran)).toHaveLength(1);
      expect(most).toBe(1);
      // Released: the next round runs again; both instances' full rounds do not fail side by side.
      expect((await underLease(b.ctx.db.sql, 'test job', 60_000, job)).ran).toBe(true);
      await Promise.all([runMaintenance(a.ctx), runMaintenance(b.ctx)]);
    });

    /** `limit` requests a minute for one user, fired at both instances at once: exactly `limit` pass. */
    async function expectSharedBudget(env: Record<string, string>, limit: number): Promise<void> {
      const [one, two] = await twoInstances({ ...env, RATE_LIMIT_PER_MINUTE: String(limit) });
      const user = await registerUser(one);
      const answers = await Promise.all(
        Array.from({ length: 3 * limit }, (_, i) =>
          (i % 2 === 0 ? one : two).http.get('/auth/me').set('Authorization', user.auth),
        ),
      );
      const statuses = answers.map((res) => res.status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(limit);
      expect(statuses.filter((s) => s === 429)).toHaveLength(2 * limit);
      for (const instance of [one, two])
        await instance.http.get('/auth/me').set('Authorization', user.auth).expect(429);
    }

    it('count the rate limit per instance with the memory store (the default)', async () => {
      const [one, two] = await twoInstances({ RATE_LIMIT_PER_MINUTE: '4' });
      const user = await registerUser(one);
      for (const instance of [one, two]) {
        for (let i = 0; i < 4; i++) await instance.http.get('/auth/me').set('Authorization', user.auth).expect(200);
        await instance.http.get('/auth/me').set('Authorization', user.auth).expect(429);
      }
    });

    it('count the rate limit across both with RATE_LIMIT_STORE=postgres', async () => {
      await expectSharedBudget({ RATE_LIMIT_STORE: 'postgres' }, 10);
    });

    it.runIf(process.env.TEST_REDIS_URL)('count the rate limit across both with RATE_LIMIT_STORE=redis', async () => {
      await expectSharedBudget({ RATE_LIMIT_STORE: 'redis', REDIS_URL: process.env.TEST_REDIS_URL ?? '' }, 10);
    });
  });
});

interface Instance extends TestService {
  baseUrl: string;
}

/** One instance of the service, listening on its own port, on an existing database. */
async function startInstance(databaseUrl: string, env: Record<string, string>): Promise<Instance> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'instance-'));
  const db = openTestDatabase(databaseUrl);
  const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', ...env });
  const ctx = await createContext(config, db, pino({ level: 'silent' }));
  const server = http.createServer(buildApp(ctx));
  const port = await listenOnLoopback(server);
  const baseUrl = `http://127.0.0.1:${port}`;
  return {
    ctx,
    baseUrl,
    http: request(baseUrl),
    databaseUrl,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await closeContext(ctx);
      await db.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

async function storedKeys(instance: Instance): Promise<string[]> {
  const keys: string[] = [];
  for await (const entry of instance.ctx.attachmentStorage.list()) keys.push(entry.key);
  return keys;
}
