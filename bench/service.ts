// The service under test, started as users start it: `npm start` (which checks the build and runs
// dist/bundle/server/main.js) in a process group of its own, on a scratch DATA_DIR with its own embedded
// PostgreSQL, or on a fresh database of a given server.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import path from 'node:path';
import pg from 'pg';
import { z } from 'zod';

export const ISSUER = 'task-service';
export const AUDIENCE = 'task-service';
export const ADMIN = { email: 'bench-admin@example.test', password: 'bench admin password' };
/** USER_MAX_TASKS, which the stack baseline's POST /tasks checks too. */
export const MAX_TASKS_PER_USER = 100_000;

export function buildService(): void {
  const built = spawnSync('npm', ['run', 'build', '--silent'], { stdio: 'inherit' });
  if (built.status !== 0) throw new Error('npm run build failed');
}

/** A port nobody listens on now. (The service's "listening on" line is at info level, below LOG_LEVEL=warn.) */
async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  if (address === null || typeof address === 'string') throw new Error('no TCP port');
  return address.port;
}

/** A fresh database on DATABASE_URL's server, dropped by the returned function. */
export async function freshExternalDatabase(serverUrl: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `task_bench_${Date.now()}_${process.pid}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: serverUrl });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

/** The embedded server's connection string: its role's password file and its socket directory. */
export async function embeddedDatabaseUrl(dataDir: string): Promise<string> {
  const password = (await readFile(path.join(dataDir, 'keys', 'postgres-password'), 'utf8')).trim();
  // postmaster.pid's fifth line is the socket directory (DATA_DIR/run, or a short one in /tmp).
  const socketDir = (await readFile(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[4]?.trim();
  if (!socketDir) throw new Error('the embedded PostgreSQL has no socket directory');
  const url = new URL('postgresql://task_service@localhost/tasks');
  url.password = password;
  url.searchParams.set('host', socketDir);
  return url.toString();
}

export interface RunningService {
  url: string;
  /** The root of the service's process tree: npm's process (or the service's, when profiled). */
  pid: number;
  /** Whether the root is npm, whose own process is not the service's. */
  viaNpm: boolean;
  /** Log lines at error level or above since the start. */
  errorLines: () => string[];
  stop(): Promise<void>;
}

export interface ServiceOptions {
  dataDir: string;
  databaseUrl: string | undefined;
  workers: number;
}

const PackageSchema = z.object({ scripts: z.object({ start: z.string() }) });

/** The Node.js options `npm start` gives the service (package.json's start script: its V8 heap limits). */
async function startNodeOptions(): Promise<string[]> {
  const { start } = PackageSchema.parse(JSON.parse(await readFile('package.json', 'utf8'))).scripts;
  const words = start.split(/\s+/);
  return words
    .slice(words.indexOf('node') + 1, words.indexOf('scripts/run.mjs'))
    .filter((word) => word.startsWith('--'));
}

async function waitUntilReady(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the service exited with code ${child.exitCode} during start-up`);
    const ready = await fetch(`${url}/readyz`).then(
      (res) => res.ok,
      () => false,
    );
    if (ready) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error('the service was not ready within two minutes');
}

export async function startService({ dataDir, databaseUrl, workers }: ServiceOptions): Promise<RunningService> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    DATABASE_URL: databaseUrl ?? '',
    // A server reached directly, as docs/operations.md says to declare it: statements prepared,
    // the statement timeout the session's, LISTEN for the event readers.
    DATABASE_DIRECT_URL: databaseUrl ?? '',
    LOG_LEVEL: 'warn',
    RATE_LIMIT_PER_MINUTE: '0',
    // Every login takes a point from its account's and its address's budget until its password is
    // found right: 50 concurrent logins from one address would otherwise be 429s, not argon2.
    LOGIN_MAX_FAILURES_PER_ACCOUNT: '100000',
    LOGIN_MAX_FAILURES_PER_ADDRESS: '100000',
    WEB_CONCURRENCY: String(workers),
    JWT_ISSUER: ISSUER,
    JWT_AUDIENCE: AUDIENCE,
    JWT_PRIVATE_KEY: '',
    ACCESS_TOKEN_TTL_SECONDS: '3600',
    ADMIN_EMAIL: ADMIN.email,
    ADMIN_PASSWORD: ADMIN.password,
    USER_MAX_TASKS: String(MAX_TASKS_PER_USER),
    // The upload row writes a few GiB (1 MiB a request) as fast as it can: past the default 1 GiB a
    // user, its answers would be 409s, not uploads.
    USER_STORAGE_QUOTA_BYTES: String(2 ** 40),
  };
  // BENCH_CPU_PROF=DIR: the service's processes write a V8 CPU profile each into DIR when they stop.
  // Node refuses --cpu-prof in NODE_OPTIONS, so the service is then started as npm starts it (the
  // same node options and node scripts/run.mjs server/main), without npm.
  const profileDir = process.env.BENCH_CPU_PROF;
  const [command, args] = profileDir
    ? [
        process.execPath,
        [
          ...(await startNodeOptions()),
          '--cpu-prof',
          `--cpu-prof-dir=${path.resolve(profileDir)}`,
          'scripts/run.mjs',
          'server/main',
        ],
      ]
    : ['npm', ['start', '--silent']];
  const child = spawn(command, args, {
    env,
    // A process group of its own, stopped as a terminal or a supervisor stops it.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const errors: string[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on('line', (line) => {
      // pino levels: 50 error, 60 fatal; anything not JSON (a crash's stack) counts too.
      const level = /"level":(\d+)/.exec(line)?.[1];
      if (line.trim() && (level === undefined || Number(level) >= 50)) errors.push(line.slice(0, 300));
    });
  }
  const url = `http://127.0.0.1:${port}`;
  await waitUntilReady(url, child);
  if (child.pid === undefined) throw new Error('the service has no process id');
  return {
    url,
    pid: child.pid,
    viaNpm: !profileDir,
    errorLines: () => [...errors],
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      const group = (signal: NodeJS.Signals) => {
        if (child.pid !== undefined) process.kill(-child.pid, signal);
      };
      group('SIGTERM');
      const timer = setTimeout(() => group('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
