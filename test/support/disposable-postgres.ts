// A PostgreSQL server of a test run's own from installed binaries (Debian's, /usr/lib/postgresql/N/bin),
// on a private port and socket: never the shared server on 5432.
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface DisposablePostgres {
  url: string;
  start(): Promise<unknown>;
  stop(): Promise<unknown>;
  kill(): Promise<void>;
  remove(): Promise<void>;
}

/** A temporary directory that PostgreSQL's account can pass through when tests run as root. */
export async function serverReachableTempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  await chmod(dir, 0o711);
  return dir;
}

async function freePort(): Promise<number> {
  const probe = createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => probe.once('listening', resolve));
  const address = probe.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** Starts a fresh cluster from the binaries in `bin`; `settings` are passed to the server as -c name=value. */
export async function disposablePostgres(
  bin: string,
  settings: Record<string, string> = {},
): Promise<DisposablePostgres> {
  const dir = await serverReachableTempDir('task-service-pg-');
  const pgData = path.join(dir, 'data');
  const account =
    process.getuid?.() === 0
      ? {
          uid: Number((await run('id', ['-u', 'postgres'])).stdout),
          gid: Number((await run('id', ['-g', 'postgres'])).stdout),
        }
      : {};
  const port = await freePort();
  if (process.getuid?.() === 0) await run('chown', ['postgres', dir]); // PostgreSQL refuses to run as root
  await run(
    `${bin}/initdb`,
    ['-D', pgData, '-U', 'postgres', '-A', 'trust', '--no-instructions', '-E', 'UTF8', '--locale=C'],
    account,
  );
  const options = [
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`,
    ...Object.entries({ fsync: 'off', ...settings }).map(([name, value]) => `-c ${name}=${value}`),
  ].join(' ');
  const start = () =>
    run(`${bin}/pg_ctl`, ['start', '-D', pgData, '-w', '-s', '-l', path.join(dir, 'log'), '-o', options], account);
  await start();
  const pid = async () => Number((await readFile(path.join(pgData, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  return {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    start,
    stop: () => run(`${bin}/pg_ctl`, ['stop', '-D', pgData, '-m', 'fast', '-w', '-s'], account),
    kill: async () => {
      process.kill(await pid(), 'SIGKILL');
    },
    remove: async () => {
      await run(`${bin}/pg_ctl`, ['stop', '-D', pgData, '-m', 'immediate', '-w', '-s'], account).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
