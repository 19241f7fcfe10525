import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { sql } from 'kysely';
import { pino } from 'pino';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext, createContext } from '../server/bootstrap.js';
import { loadConfig } from '../server/config.js';
import { openPostgres } from '../server/db/database.js';
import { rawQuery } from '../server/db/query.js';
import { createHttpServer } from '../server/serve.js';
import type { TestService } from './support/app.js';
import { directUrlOf, freshDatabase, throughPooler, type TestDatabase } from './support/databases.js';
import { expectProblem } from './support/problems.js';
import { killIfRunning, startServiceProcess, type ServiceProcess } from './support/processes.js';
import { eventCount, openSse } from './support/sse.js';
import { createTask } from './support/tasks.js';
import { login, registerUser } from './support/users.js';
import { listenOnLoopback } from './support/loopback.js';

// Project "pgbouncer" only: DATABASE_URL is a PgBouncer in transaction mode with its default
// settings (TEST_POOLER_URL, started by .ci/run), in front of TEST_DATABASE_URL's server.
describe.runIf(throughPooler())('behind PgBouncer in transaction mode', () => {
  let database: TestDatabase;
  const opened: Instance[] = [];
  beforeAll(async () => {
    database = await freshDatabase();
  });
  afterAll(async () => {
    await Promise.all(opened.map((instance) => instance.close()));
    await database.drop();
  });

  /** An instance on the pooler, with DATABASE_DIRECT_URL or without. */
  async function instance(direct: boolean, env: Record<string, string> = {}): Promise<Instance> {
    const made = await startInstance(database.url, direct ? directUrlOf(database.url) : undefined, env);
    opened.push(made);
    return made;
  }

  it('starts, migrates and serves as an operator runs it, with nothing in ignore_startup_parameters', async () => {
    let service: ServiceProcess | undefined;
    const dataDir = await mkdtemp(path.join(tmpdir(), 'pooler-'));
    const name = `task_service_pooled_${randomUUID().replace(/-/g, '')}`;
    await onServer(`CREATE DATABASE ${name}`);
    try {
      // Migrations through the pooler (no direct URL): one transaction, a transaction-scoped lock.
      const empty = new URL(database.url);
      empty.pathname = `/${name}`;
      service = await startServiceProcess({
        DATABASE_URL: empty.toString(),
        DATA_DIR: dataDir,
        REGISTRATION_ENABLED: 'true',
      });
      expect(service.stdout()).toContain('migrations applied');
      expect((await fetch(`${service.url}/readyz`)).status).toBe(200);
      const registered = await fetch(`${service.url}/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'pooled@example.test', password: 'long enough password', name: 'Pooled' }),
      });
      expect(registered.status).toBe(201);
    } finally {
      killIfRunning(service);
      await service?.exited;
      await rm(dataDir, { recursive: true, force: true });
      await onServer(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    }
  }, 120_000);

  it('says what the pooler refused when it refuses the connection, in one line', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'pooler-'));
    try {
      // An operator's start-up parameter in the URL: PgBouncer's default settings refuse it.
      const withOption = `${database.url}?options=${encodeURIComponent('-c search_path=public')}`;
      const failed = await startServiceProcess({ DATABASE_URL: withOption, DATA_DIR: dataDir }).then(
        () => undefined,
        (error: unknown) => String(error),
      );
      expect(failed).toMatch(/refused the connection: unsupported startup parameter: options/);
      expect(failed).not.toMatch(/Cannot reach/);
      const lines = (failed ?? '')
        .replace(/^Error: exited with 1: /, '')
        .trim()
        .split('\n');
      expect(lines).toHaveLength(1);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 120_000);

  it('bounds every statement by the statement timeout, inside transactions and out (503 past it)', async () => {
    const a = await instance(false, { DATABASE_STATEMENT_TIMEOUT_MS: '300' });
    const alice = await registerUser(a);
    const task = await createTask(a, alice);
    const holder = new pg.Client({ connectionString: directUrlOf(database.url) });
    await holder.connect();
    try {
      // A plain read (one statement outside a transaction) waits for the table lock, boundedly.
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE');
      const read = await a.http.get(`/tasks/${task.id}`).set('Authorization', alice.auth);
      expectProblem(read, 503, 'unavailable', `/tasks/${task.id}`);
      // A write (an interactive transaction) waits for the row lock, boundedly.
      await holder.query('ROLLBACK');
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE', [task.id]);
      const write = await a.http
        .patch(`/tasks/${task.id}`)
        .set('Authorization', alice.auth)
        .set('Content-Type', 'application/merge-patch+json')
        .send({ title: 'changed' });
      expectProblem(write, 503, 'unavailable', `/tasks/${task.id}`);
      await holder.query('ROLLBACK');
      await a.http
        .patch(`/tasks/${task.id}`)
        .set('Authorization', alice.auth)
        .set('Content-Type', 'application/merge-patch+json')
        .send({ title: 'changed' })
        .expect(200);
      await a.http.get(`/tasks/${task.id}`).set('Authorization', alice.auth).expect(200);
    } finally {
      await holder.end();
    }
    // Every way the service sends SQL runs with the timeout: built queries and plain SQL, in a transaction and not.
    const bounded = openPostgres(database.url, { poolSize: 2, statementTimeoutMs: 250 });
    const unbounded = openPostgres(database.url, { poolSize: 2 });
    const timeout = `SELECT current_setting('statement_timeout') AS t`;
    const setting = rawQuery(sql<{ t: string }>`SELECT current_setting('statement_timeout') AS t`);
    try {
      expect(await bounded.sql.first(setting)).toEqual({ t: '250ms' });
      expect(await bounded.sql.transaction((tx) => tx.first(setting))).toEqual({ t: '250ms' });
      expect(await bounded.sql.rows(timeout)).toEqual([{ t: '250ms' }]);
      expect(await bounded.sql.transaction((tx) => tx.rows(timeout))).toEqual([{ t: '250ms' }]);
      // …and leaves nothing behind on the server connections the pooler hands to others.
      expect(await unbounded.sql.rows(timeout)).toEqual([{ t: '0' }]);
    } finally {
      await bounded.close();
      await unbounded.close();
    }
  });

  for (const { direct, withinMs } of [
    { direct: true, withinMs: 1_000 },
    { direct: false, withinMs: 2_000 },
  ]) {
    it(`wakes a stream on instance B within ${withinMs / 1000} s of a create on instance A ${direct ? 'with' : 'without'} DATABASE_DIRECT_URL`, async () => {
      const [a, b] = await Promise.all([instance(direct), instance(direct)]);
      const alice = await registerUser(a);
      const onB = await login(b, alice.email, alice.password);
      const sse = await openSse(b.baseUrl, { Authorization: onB.auth });
      try {
        const lags: number[] = [];
        for (let i = 1; i <= 3; i++) {
          await createTask(a, alice, { title: `from A ${i}` });
          const created = Date.now();
          await sse.until((frames) => eventCount(frames) === i, 10_000);
          lags.push(Date.now() - created);
        }
        expect(sse.events().map((event) => event.type)).toEqual(['task.created', 'task.created', 'task.created']);
        expect(Math.max(...lags), `lags ${lags.join(', ')} ms`).toBeLessThanOrEqual(withinMs);
      } finally {
        sse.close();
      }
    });
  }
});

interface Instance extends TestService {
  baseUrl: string;
}

/** Runs `sql` on the server itself (not through the pooler). */
async function onServer(sql: string): Promise<void> {
  const admin = new pg.Client({ connectionString: directUrlOf(process.env.TEST_POOLER_URL ?? '') });
  await admin.connect();
  try {
    await admin.query(sql);
  } finally {
    await admin.end();
  }
}

/** One instance of the service on `url` (the pooler), listening on its own port. */
async function startInstance(
  url: string,
  directUrl: string | undefined,
  env: Record<string, string>,
): Promise<Instance> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'pooled-instance-'));
  const config = loadConfig({
    DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '0',
    DATABASE_URL: url,
    ...(directUrl && { DATABASE_DIRECT_URL: directUrl }),
    ...env,
  });
  // As main.ts opens it.
  const db = openPostgres(url, { poolSize: 5, statementTimeoutMs: config.databaseStatementTimeoutMs, directUrl });
  const ctx = await createContext(config, db, pino({ level: 'silent' }));
  const server = createHttpServer(ctx);
  const port = await listenOnLoopback(server);
  const baseUrl = `http://127.0.0.1:${port}`;
  return {
    ctx,
    baseUrl,
    http: request(baseUrl),
    databaseUrl: url,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await closeContext(ctx);
      await db.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
