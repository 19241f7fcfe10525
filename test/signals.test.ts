// Stop signals at any moment: SIGTERM/SIGINT sent to `npm start`'s process or to its process group
// stop the whole tree, the embedded PostgreSQL included, within 10 s; start-up too. npm forwards the
// signal it gets, so the service sees a group's signal twice: a repeat within 2 s is the same request.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import http from 'node:http';
import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { z } from 'zod';
import { AuthResultSchema } from '../contract/auth.js';
import { postgresUrl, readyDataDir, serverReachableTempDir } from './support/databases.js';
import { exitWithin, isAlive, npmStart, postgresPid, type NpmStart } from './support/process-tree.js';

const STOP_WITHIN_MS = 10_000;
/** A repeat of the stop signal within this is the same request; a second SIGINT after it forces the stop. */
const REPEAT_WITHIN_MS = 2_000;
const embedded = process.env.TEST_DB === 'embedded';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Sends `signal` to npm's process group, or to npm's process alone. */
function signal(started: NpmStart, to: 'group' | 'npm', name: NodeJS.Signals): void {
  process.kill(to === 'group' ? -started.pid : started.pid, name);
}

/**
 * The same signal again after `ms` (an impatient operator), unless the group has ended by then; whether
 * it was sent. On a busy machine the sleep overshoots: the service may have exited already, and npm,
 * about to exit with its code, is then ended by the signal itself, as a shell's second Ctrl-C does.
 */
async function repeatAfter(ms: number, started: NpmStart, name: NodeJS.Signals): Promise<boolean> {
  await sleep(ms);
  if (started.child.exitCode !== null || started.child.signalCode !== null) return false;
  signal(started, 'group', name);
  return true;
}

/** Expects npm, every process it started and the embedded server of `dataDir` gone within 10 s of `signalledAt`. */
async function expectAllGone(started: NpmStart, signalledAt: number, dataDir?: string): Promise<void> {
  await exitWithin(started, STOP_WITHIN_MS + 5_000);
  const tree = await started.seen();
  const alive = async () => {
    const server = dataDir ? await postgresPid(dataDir) : undefined;
    return [...tree.filter(isAlive), ...(server ? [server] : [])];
  };
  while ((await alive()).length > 0 && Date.now() - signalledAt < STOP_WITHIN_MS + 5_000)
    await new Promise((resolve) => setTimeout(resolve, 50));
  const ms = Date.now() - signalledAt;
  expect(await alive(), started.output()).toEqual([]);
  expect(ms, started.output()).toBeLessThan(STOP_WITHIN_MS);
  // Everyone has gone, but what the last of them wrote may still be on its way through the pipe
  // (the service outlives npm when a repeated signal ends npm first). A pipe still open means a
  // process outside the tree seen holds it.
  let timer: NodeJS.Timeout | undefined;
  const closed = await Promise.race([
    started.closed.then(() => true),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), 5_000))),
  ]);
  clearTimeout(timer);
  expect(closed, `npm's output still open: ${started.output()}`).toBe(true);
}

/**
 * A stop during start-up is a clean one: the service said so in one line, nothing else on stderr, and
 * exited 0, which npm passes on (or npm was ended by a repeated signal, which then tells nothing of
 * the service's exit: its line is printed just before).
 */
function expectStoppedWhileStarting(started: NpmStart, repeated = false): void {
  if (!(repeated && started.child.signalCode === 'SIGTERM')) expect(started.child.exitCode, started.output()).toBe(0);
  expect(started.output()).toMatch(/stopped while starting/);
  expect(started.output()).not.toMatch(/unexpected failure|listening on/);
}

/** Waits until the embedded server of `dataDir` has a process (it may still be starting). */
async function postgresSpawned(started: NpmStart, dataDir: string): Promise<void> {
  while ((await postgresPid(dataDir)) === undefined) {
    if (started.child.exitCode !== null) throw new Error(started.output());
    await sleep(10);
  }
}

/** Registers an account on a serving instance; its bearer token. */
async function register(url: string): Promise<string> {
  const registered = await fetch(`${url}/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      email: `signals-${randomUUID()}@example.test`,
      password: 'long enough password',
      name: 'S',
    }),
  });
  return AuthResultSchema.parse(await registered.json()).accessToken;
}

/** POST /tasks with a body that arrives in ten parts over `overMs`: a request in flight that long. Its status, or the error that cut it. */
function slowCreate(url: string, accessToken: string, overMs: number): Promise<number | Error> {
  const body = Buffer.from(JSON.stringify({ title: 'slow create', description: 'x'.repeat(1000) }));
  return new Promise((resolve) => {
    const { hostname, port } = new URL(url);
    const req = http.request(
      {
        host: hostname,
        port,
        path: '/tasks',
        method: 'POST',
        headers: {
          authorization: `Bearer ${accessToken}`,
          'content-type': 'application/json',
          'content-length': body.length,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', resolve);
      },
    );
    req.on('error', resolve);
    const parts = 10;
    const size = Math.ceil(body.length / parts);
    let sent = 0;
    const next = () => {
      req.write(body.subarray(sent * size, (sent + 1) * size));
      if (++sent < parts) setTimeout(next, overMs / parts).unref();
      else req.end();
    };
    next();
  });
}

describe.runIf(embedded)('stop signals on the embedded PostgreSQL', () => {
  let dataDir: string;
  beforeAll(async () => {
    // Ready (initdb'd, migrated): these tests are about stops, not a first start (the first test's is).
    dataDir = await readyDataDir('task-service-signals-');
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it('SIGTERM to the process group while the first start initialises the database stops everything and leaves nothing half made', async () => {
    // A new data directory, kept: the signal must come while initdb runs.
    const fresh = await serverReachableTempDir('task-service-signals-initdb-');
    try {
      const started = npmStart({ DATA_DIR: fresh, WEB_CONCURRENCY: '2' });
      await started.line(/initialising the embedded PostgreSQL/);
      const signalledAt = Date.now();
      signal(started, 'group', 'SIGTERM');
      // Soon after, while the stop of initdb (about 300 ms) goes on.
      const repeated = await repeatAfter(100, started, 'SIGTERM');
      await expectAllGone(started, signalledAt, fresh);
      expectStoppedWhileStarting(started, repeated);
      const left = await readdir(fresh);
      expect(left.filter((name) => /^postgres\.init-|^\.postgres-password-/.test(name))).toEqual([]);
      // The cluster is there whole (initdb had finished) or not at all.
      if (left.includes('postgres')) expect(existsSync(path.join(fresh, 'postgres', 'PG_VERSION'))).toBe(true);
    } finally {
      await rm(fresh, { recursive: true, force: true });
    }
  }, 60_000);

  it('SIGTERM to the process group once the embedded server has a process during start-up stops it cleanly', async () => {
    const started = npmStart({ DATA_DIR: dataDir, WEB_CONCURRENCY: '2' });
    await postgresSpawned(started, dataDir);
    const signalledAt = Date.now();
    signal(started, 'group', 'SIGTERM');
    const repeated = await repeatAfter(300, started, 'SIGTERM');
    await expectAllGone(started, signalledAt, dataDir);
    expectStoppedWhileStarting(started, repeated);
  }, 60_000);

  it("SIGTERM to npm's process alone, once the embedded server runs during start-up, stops it and the tree", async () => {
    const started = npmStart({ DATA_DIR: dataDir, WEB_CONCURRENCY: '2' });
    await postgresSpawned(started, dataDir);
    const signalledAt = Date.now();
    signal(started, 'npm', 'SIGTERM');
    await expectAllGone(started, signalledAt, dataDir);
    expectStoppedWhileStarting(started);
  }, 60_000);

  it("runs the service with glibc's malloc arenas capped at 2 (MALLOC_ARENA_MAX), unless the environment says otherwise", async () => {
    // Empty is unset to the shell, as to glibc.
    for (const [given, expected] of [
      ['', '2'],
      ['4', '4'],
    ] as const) {
      const started = npmStart({ DATA_DIR: dataDir, MALLOC_ARENA_MAX: given });
      const { pid } = z.object({ pid: z.number() }).parse(JSON.parse(await started.line(/listening on/)));
      const environment = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0');
      const signalledAt = Date.now();
      signal(started, 'group', 'SIGTERM');
      await expectAllGone(started, signalledAt, dataDir);
      expect(environment).toContain(`MALLOC_ARENA_MAX=${expected}`);
    }
  }, 60_000);

  it('SIGTERM to the process group, repeated, lets a request in flight finish and stops PostgreSQL cleanly', async () => {
    const started = npmStart({ DATA_DIR: dataDir, WEB_CONCURRENCY: '2' });
    const url = /listening on (http:\/\/[^"]+)/.exec(await started.line(/listening on/))?.[1] ?? '';
    const inFlight = slowCreate(url, await register(url), 4_000);
    const logLength = (await readFile(path.join(dataDir, 'postgres', 'server.log'), 'utf8')).length;
    await sleep(300);
    const signalledAt = Date.now();
    signal(started, 'group', 'SIGTERM');
    await sleep(200);
    signal(started, 'group', 'SIGTERM'); // within 2 s: the same request
    await sleep(REPEAT_WITHIN_MS);
    signal(started, 'group', 'SIGTERM'); // after 2 s, a SIGTERM still never forces
    expect(await inFlight).toBe(201);
    await expectAllGone(started, signalledAt, dataDir);
    expect(started.child.exitCode, started.output()).toBe(0);
    // Stopped cleanly (a fast shutdown, not an immediate one that needs crash recovery at the next start).
    const serverLog = (await readFile(path.join(dataDir, 'postgres', 'server.log'), 'utf8')).slice(logLength);
    expect(serverLog).toMatch(/received fast shutdown request[^]*database system is shut down/);
    expect(serverLog).not.toMatch(/immediate shutdown/);
  }, 60_000);

  it('a second SIGINT more than 2 s after the first forces the stop, and PostgreSQL is stopped still', async () => {
    const started = npmStart({ DATA_DIR: dataDir, WEB_CONCURRENCY: '2' });
    const url = /listening on (http:\/\/[^"]+)/.exec(await started.line(/listening on/))?.[1] ?? '';
    // A request that would hold the stop for most of its 10 s.
    const inFlight = slowCreate(url, await register(url), 9_000);
    await sleep(300);
    signal(started, 'group', 'SIGINT');
    await sleep(REPEAT_WITHIN_MS + 500);
    const forcedAt = Date.now();
    signal(started, 'group', 'SIGINT');
    await expectAllGone(started, forcedAt, dataDir);
    expect(Date.now() - forcedAt).toBeLessThan(3_000);
    expect(await inFlight).toBeInstanceOf(Error); // cut: that is what forcing means
  }, 60_000);

  it('SIGINT (Ctrl-C) to the group of a serving instance with an open event stream ends the stream at once and the tree within 10 s', async () => {
    const started = npmStart({ DATA_DIR: dataDir, WEB_CONCURRENCY: '2' });
    const url = /listening on (http:\/\/[^"]+)/.exec(await started.line(/listening on/))?.[1];
    const registered = await fetch(`${url}/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        email: `streamer-${randomUUID()}@example.test`,
        password: 'long enough password',
        name: 'Streamer',
      }),
    });
    const { accessToken } = AuthResultSchema.parse(await registered.json());
    const stream = await fetch(`${url}/events`, {
      headers: { authorization: `Bearer ${accessToken}`, accept: 'text/event-stream' },
    });
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    await reader.read(); // connected
    const signalled = Date.now();
    signal(started, 'group', 'SIGINT');
    let ended = false;
    while (!ended) ended = (await reader.read().catch(() => ({ done: true }))).done;
    const streamEndedMs = Date.now() - signalled;
    await expectAllGone(started, signalled, dataDir);
    console.log(
      `SIGINT: the event stream ended after ${streamEndedMs} ms, the tree exited within ${Date.now() - signalled} ms`,
    );
  }, 120_000);
});

describe.runIf(process.env.TEST_DB === 'postgres')('stop signals on an external PostgreSQL', () => {
  let name: string;
  let admin: pg.Client;
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await serverReachableTempDir('task-service-signals-pg-');
    name = `task_service_signals_${randomUUID().replace(/-/g, '')}`;
    admin = new pg.Client({ connectionString: postgresUrl() });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
  });
  afterAll(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('SIGTERM to the process group while the service migrates an empty database stops the tree', async () => {
    const url = new URL(postgresUrl());
    url.pathname = `/${name}`;
    const started = npmStart({ DATA_DIR: dataDir, DATABASE_URL: url.toString(), WEB_CONCURRENCY: '2' });
    // The moment it is connected (migrating), not earlier.
    for (;;) {
      const { rows } = await admin.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
        [name],
      );
      if ((rows[0]?.n ?? 0) > 0) break;
      if (started.child.exitCode !== null) throw new Error(started.output());
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const signalledAt = Date.now();
    signal(started, 'group', 'SIGTERM');
    await expectAllGone(started, signalledAt);
    expect(started.output()).not.toMatch(/listening on/);
  }, 120_000);
});
