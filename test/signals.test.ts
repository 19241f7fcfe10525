// Stop signals at any moment: SIGTERM/SIGINT sent to `npm start`'s process or to its
// process group stop the whole tree, the embedded PostgreSQL included, within 10 s; start-up too.
import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { AuthResultSchema } from '../contract/auth.js';
import { postgresUrl, serverReachableTempDir } from './support/databases.js';
import { exitWithin, isAlive, npmStart, postgresPid, type NpmStart } from './support/process-tree.js';

const STOP_WITHIN_MS = 10_000;
const embedded = process.env.TEST_DB === 'embedded';

/** Sends `signal` to npm's process group, or to npm's process alone. */
function signal(started: NpmStart, to: 'group' | 'npm', name: NodeJS.Signals): void {
  process.kill(to === 'group' ? -started.pid : started.pid, name);
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
}

describe.runIf(embedded)('stop signals on the embedded PostgreSQL', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await serverReachableTempDir('task-service-signals-');
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it('SIGTERM to the process group while the first start initialises the database stops everything', async () => {
    const started = npmStart({ DATA_DIR: dataDir, WEB_CONCURRENCY: '2' });
    await started.line(/initialising the embedded PostgreSQL/);
    const signalledAt = Date.now();
    signal(started, 'group', 'SIGTERM');
    await expectAllGone(started, signalledAt, dataDir);
  }, 120_000);

  it("SIGTERM to npm's process alone, once the embedded server runs during start-up, stops it and the tree", async () => {
    const started = npmStart({ DATA_DIR: dataDir, WEB_CONCURRENCY: '2' });
    while ((await postgresPid(dataDir)) === undefined) {
      if (started.child.exitCode !== null) throw new Error(started.output());
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const signalledAt = Date.now();
    signal(started, 'npm', 'SIGTERM');
    await expectAllGone(started, signalledAt, dataDir);
  }, 120_000);

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
