import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthResultSchema } from '../contract/auth.js';
import { TaskSchema } from '../contract/tasks.js';
import { readyDataDir, serverReachableTempDir } from './support/databases.js';
import { descendants, isAlive } from './support/process-tree.js';
import { runCli, spawnService, startServiceProcess, type SpawnedService } from './support/processes.js';

// Processes run their own embedded PostgreSQL; once per run is enough, whatever the project.
const once = process.env.TEST_DB === 'embedded';

async function post(url: string, body: unknown, token?: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
}

/** The PID of the embedded PostgreSQL server of a data directory, if one is alive. */
async function postgresPid(dataDir: string): Promise<number | undefined> {
  const pidFile = await readFile(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').catch(() => undefined);
  const pid = Number(pidFile?.split('\n')[0]);
  if (!pid) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

async function stopped(service: SpawnedService): Promise<number | null> {
  service.child.kill('SIGTERM');
  return service.exited;
}

describe.runIf(once)('the service process on its embedded PostgreSQL', () => {
  let dataDir: string;
  beforeAll(async () => {
    // A new data directory, kept as the suite's one whole first start of a service process (initdb,
    // the migrations, the first signing key); the tests after the first go on in it.
    dataDir = await serverReachableTempDir('task-service-process-');
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it('starts, refuses a second service on the same data directory but lets create-admin and migrate use its server, stops its server cleanly and keeps its data', async () => {
    const first = await startServiceProcess({ DATA_DIR: dataDir, WEB_CONCURRENCY: '1' });
    try {
      expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
      const registered = await post(`${first.url}/auth/register`, {
        email: 'keeper@example.test',
        password: 'long enough password',
        name: 'Keeper',
      });
      expect(registered.status).toBe(201);
      const { accessToken } = AuthResultSchema.parse(await registered.json());

      const second = spawnService({ DATA_DIR: dataDir });
      expect(await second.exited).toBe(1);
      const stderr = second.stderr();
      expect(stderr).toMatch(/in use by another process of this service \(task-service pid \d+\)/);
      expect(stderr).toContain('Stop that process first');
      expect(stderr.trim().split('\n')).toHaveLength(1); // one line, no stack trace
      expect(second.stdout()).not.toMatch(/adopting/); // the server is the first service's, not taken over

      // create-admin and migrate work beside it, on its server (they start none of their own).
      const serverPid = await postgresPid(dataDir);
      const created = await runCli('create-admin', ['boss@example.test'], dataDir, {
        ADMIN_PASSWORD: 'operator password',
      });
      expect(created.stdout).toMatch(/administrator boss@example\.test/);
      expect((await runCli('migrate', [], dataDir)).stdout).toContain('the database schema is current');
      expect(await postgresPid(dataDir)).toBe(serverPid);
      const boss = await post(`${first.url}/auth/login`, { email: 'boss@example.test', password: 'operator password' });
      expect(boss.status).toBe(200);
      expect(await postgresPid(dataDir)).toBeDefined();

      expect(await stopped(first)).toBe(0);
      expect(await postgresPid(dataDir)).toBeUndefined(); // its server stopped with it

      // Same data directory again: the account and the signing key survived.
      const again = await startServiceProcess({ DATA_DIR: dataDir });
      try {
        const me = await fetch(`${again.url}/auth/me`, { headers: { authorization: `Bearer ${accessToken}` } });
        expect(me.status).toBe(200);
        const login = await post(`${again.url}/auth/login`, {
          email: 'keeper@example.test',
          password: 'long enough password',
        });
        expect(login.status).toBe(200);
      } finally {
        expect(await stopped(again)).toBe(0);
      }
    } finally {
      if (first.child.exitCode === null) first.child.kill('SIGKILL');
    }
  }, 120_000);

  it('after kill -9, starts again on the server left running and finds every acknowledged write', async () => {
    // Two HTTP workers: the writes go through both, and the workers end with the main process.
    const victim = await startServiceProcess({ DATA_DIR: dataDir, WEB_CONCURRENCY: '2' });
    const registered = await post(`${victim.url}/auth/register`, {
      email: 'crash@example.test',
      password: 'long enough password',
      name: 'Crash',
    });
    const { accessToken } = AuthResultSchema.parse(await registered.json());
    const acknowledged: string[] = [];
    let writing = true;
    // Four writers, so that writes are in flight on both workers when the process dies.
    const writers = [1, 2, 3, 4].map(async () => {
      while (writing) {
        const res = await post(`${victim.url}/tasks`, { title: `write ${acknowledged.length}` }, accessToken).catch(
          () => undefined,
        );
        if (res?.status === 201) acknowledged.push(TaskSchema.parse(await res.json()).id);
      }
    });
    while (acknowledged.length < 40) await new Promise((resolve) => setTimeout(resolve, 20));
    victim.child.kill('SIGKILL');
    await victim.exited;
    writing = false;
    await Promise.all(writers);
    const orphan = await postgresPid(dataDir);
    expect(orphan).toBeDefined(); // the server outlived the service

    const again = await startServiceProcess({ DATA_DIR: dataDir });
    try {
      expect(await postgresPid(dataDir)).toBe(orphan); // adopted, not restarted
      expect(again.stdout()).toMatch(/adopting the embedded PostgreSQL left running/);
      for (const id of acknowledged) {
        const res = await fetch(`${again.url}/tasks/${id}`, { headers: { authorization: `Bearer ${accessToken}` } });
        expect(res.status, id).toBe(200);
      }
    } finally {
      expect(await stopped(again)).toBe(0);
    }
    expect(await postgresPid(dataDir)).toBeUndefined();
  }, 120_000);

  it('after a power cut (every process killed, PostgreSQL too), starts again at once and serves', async () => {
    const victim = await startServiceProcess({ DATA_DIR: dataDir, WEB_CONCURRENCY: '2' }, { ownGroup: true });
    const registered = await post(`${victim.url}/auth/register`, {
      email: 'power-cut@example.test',
      password: 'long enough password',
      name: 'Power Cut',
    });
    const { accessToken } = AuthResultSchema.parse(await registered.json());
    const created = await post(`${victim.url}/tasks`, { title: 'before the power cut' }, accessToken);
    const task = TaskSchema.parse(await created.json());
    const server = await postgresPid(dataDir);
    if (server === undefined) throw new Error('no embedded PostgreSQL runs');
    // Node (the main process and its workers) and PostgreSQL (its postmaster and every backend) at once.
    const victims = [server, ...(await descendants(server))];
    process.kill(-(victim.child.pid ?? 0), 'SIGKILL');
    for (const pid of victims.filter(isAlive)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch (error) {
        // A backend may end by itself between the check and the kill, once its postmaster is gone.
        if (!(error instanceof Error && 'code' in error && error.code === 'ESRCH')) throw error;
      }
    }
    await victim.exited;

    const again = await startServiceProcess({ DATA_DIR: dataDir });
    try {
      expect(await postgresPid(dataDir)).not.toBe(server);
      const res = await fetch(`${again.url}/tasks/${task.id}`, { headers: { authorization: `Bearer ${accessToken}` } });
      expect(res.status).toBe(200);
      expect(again.stdout()).not.toMatch(/adopting/);
    } finally {
      expect(await stopped(again)).toBe(0);
    }
  }, 60_000);

  it('starts when postmaster.pid names a live process that is not its PostgreSQL (the PID of a reboot)', async () => {
    const service = await startServiceProcess({ DATA_DIR: dataDir });
    const pidFile = path.join(dataDir, 'postgres', 'postmaster.pid');
    const running = (await readFile(pidFile, 'utf8')).split('\n');
    expect(await stopped(service)).toBe(0);
    const stranger = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      // What a power cut leaves: the server's lock files, naming a PID that another process has now.
      const lockFile = [String(stranger.pid), ...running.slice(1, 5), ''].join('\n');
      await writeFile(pidFile, [String(stranger.pid), ...running.slice(1)].join('\n'));
      await writeFile(path.join(running[4] ?? '', '.s.PGSQL.5432.lock'), lockFile);
      const again = await startServiceProcess({ DATA_DIR: dataDir });
      try {
        expect((await fetch(`${again.url}/readyz`)).status).toBe(200);
        expect(again.stdout()).not.toMatch(/adopting/);
      } finally {
        expect(await stopped(again)).toBe(0);
      }
      expect(isAlive(stranger.pid ?? 0)).toBe(true); // left alone
    } finally {
      stranger.kill('SIGKILL');
    }
  }, 60_000);
});

describe.runIf(once)('start-up failures', () => {
  let dataDir: string;
  beforeAll(async () => {
    // Some failures come once the database is open (the object store, Redis): no initdb first.
    dataDir = await readyDataDir('task-service-startup-');
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  /** Starts the service with `env`, expects it to stop with exit code 1 and one line on stderr. */
  async function failure(env: Record<string, string>): Promise<string> {
    // The service's own request limit (the test processes have none): its store is opened, and checked, at start-up.
    const started = spawnService({ DATA_DIR: dataDir, RATE_LIMIT_PER_MINUTE: '600', ...env });
    expect(await started.exited).toBe(1);
    const lines = started.stderr().trim().split('\n');
    expect(lines, started.stderr()).toHaveLength(1);
    expect(lines[0]).toMatch(/^task-service: /);
    return lines[0]!;
  }

  it.each([
    [{ PORT: 'eighty' }, /Invalid configuration: PORT must be a port number/],
    [{ TRUST_PROXY: 'yes please' }, /TRUST_PROXY must be true, false, a hop count/],
    [
      { CORS_ORIGINS: 'app.example.com' },
      /CORS_ORIGINS must be \* or comma-separated origins such as https:\/\/app\.example\.com/,
    ],
    [{ DATABASE_URL: 'mysql://db.internal/tasks' }, /DATABASE_URL must be a PostgreSQL connection string/],
    [
      { DATABASE_URL: 'postgresql://tasks:secret@127.0.0.1:1/tasks' },
      /Cannot reach PostgreSQL at 127\.0\.0\.1:1\/tasks \(ECONNREFUSED\): is the server running, and is DATABASE_URL right\?/,
    ],
    [{ DATABASE_DIRECT_URL: 'postgresql://tasks:secret@127.0.0.1:1/tasks' }, /DATABASE_DIRECT_URL needs DATABASE_URL/],
    [
      { JWT_PRIVATE_KEY: 'not a key' },
      /JWT_PRIVATE_KEY is not an Ed25519 private key in PKCS#8 PEM: make one with `openssl genpkey -algorithm ed25519`/,
    ],
    [
      {
        ATTACHMENT_STORAGE: 's3',
        S3_BUCKET: 'files',
        S3_ENDPOINT: 'http://127.0.0.1:1',
        S3_ACCESS_KEY_ID: 'id',
        S3_SECRET_ACCESS_KEY: 'secret',
      },
      /Attachment storage: bucket "files" at http:\/\/127\.0\.0\.1:1 is not usable: /,
    ],
    [
      { RATE_LIMIT_STORE: 'redis', REDIS_URL: 'redis://127.0.0.1:1' },
      /Rate limit store: Redis at REDIS_URL is not reachable: /,
    ],
  ])(
    'says what is wrong with %j in one line',
    async (env, message) => {
      expect(await failure(env)).toMatch(message);
    },
    60_000,
  );

  it('names DATABASE_DIRECT_URL in one line when DATABASE_URL answers and it does not', async () => {
    const env = {
      DATABASE_URL: process.env.TEST_EMBEDDED_URL ?? '',
      DATABASE_DIRECT_URL: 'postgresql://tasks:secret@127.0.0.1:1/tasks',
    };
    expect(await failure(env)).toMatch(
      /Cannot reach PostgreSQL at 127\.0\.0\.1:1\/tasks \(ECONNREFUSED\): is the server running, and is DATABASE_DIRECT_URL right\?/,
    );
  }, 60_000);

  it('checks the port and the signing key before the embedded database starts (no initdb, no server)', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const address = taken.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      for (const [env, message] of [
        [{ PORT: String(port) }, /Port \d+ on 127\.0\.0\.1 is in use/],
        [{ JWT_PRIVATE_KEY: 'not a key' }, /JWT_PRIVATE_KEY is not an Ed25519 private key/],
      ] as const) {
        // A new data directory, kept: the test is that no initdb runs in it.
        const fresh = await serverReachableTempDir('task-service-precheck-');
        try {
          const started = spawnService({ DATA_DIR: fresh, ...env });
          expect(await started.exited).toBe(1);
          expect(started.stderr().trim().split('\n')).toHaveLength(1);
          expect(started.stderr()).toMatch(message);
          expect(existsSync(path.join(fresh, 'postgres')), JSON.stringify(env)).toBe(false);
        } finally {
          await rm(fresh, { recursive: true, force: true });
        }
      }
    } finally {
      taken.close();
    }
  }, 120_000);

  it('says so in one line when the port is in use', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const address = taken.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    try {
      expect(await failure({ PORT: String(port), WEB_CONCURRENCY: '2' })).toMatch(
        new RegExp(`Port ${port} on 127\\.0\\.0\\.1 is in use: stop what listens there, or set PORT`),
      );
    } finally {
      taken.close();
    }
  }, 60_000);
});
