import { execFile, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';

// The service as an operator runs it, in a process of its own: the production build (`npm start`
// runs dist/bundle/server/main.js), which global setup brings up to date with the sources before any test.
export const ROOT = path.resolve(import.meta.dirname, '..', '..');
const run = promisify(execFile);

/**
 * What every spawned process runs with: an ephemeral port on loopback, the embedded database (in
 * DATA_DIR) unless `env` names another, one HTTP worker (a signal or a kill reaches the process that
 * serves), no rate limit, info logs. `env` is added.
 */
function environment(env: Record<string, string>): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: '',
    LOG_LEVEL: 'info',
    RATE_LIMIT_PER_MINUTE: '0',
    WEB_CONCURRENCY: '1',
    ...env,
  };
}

export interface SpawnedService {
  child: ChildProcess;
  /** Resolves with the exit code (null when killed by a signal) once its output is complete. */
  exited: Promise<number | null>;
  /** `http://127.0.0.1:<port>` once it says where it listens; rejects if it exits first. */
  listening: Promise<string>;
  stdout(): string;
  stderr(): string;
}

export interface ServiceProcess extends SpawnedService {
  url: string;
}

export interface SpawnOptions {
  /** In a process group of its own (as a terminal gives it), so that killGroup reaches its workers and its embedded PostgreSQL. */
  ownGroup?: boolean;
}

/** The built file of `entry` (`server/main`, `server/cli/migrate`…), relative to ROOT: what `npm start` and the commands run. */
export const builtEntry = (entry: string) => `dist/bundle/${entry}.js`;

/** `node dist/bundle/server/main.js` with `env` (DATA_DIR at least); does not wait for it to listen. */
export function spawnService(env: Record<string, string>, { ownGroup = false }: SpawnOptions = {}): SpawnedService {
  const child = spawn(process.execPath, [builtEntry('server/main')], {
    cwd: ROOT,
    env: environment(env),
    detached: ownGroup,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // 'close' comes after the output streams end, so the output is complete by then.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const listening = new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (stdout.length < 100_000) stdout += `${line}\n`;
      const match = /listening on (http:\/\/[^"]+)/.exec(line);
      if (match?.[1]) resolve(match[1]);
    });
    void exited.then((code) => reject(new Error(`exited with ${code}: ${stderr}`)));
  });
  // A process expected to fail is never asked where it listens.
  listening.catch(() => undefined);
  return { child, exited, listening, stdout: () => stdout, stderr: () => stderr };
}

/** Spawns the service (see spawnService) and waits until it says where it listens. */
export async function startServiceProcess(
  env: Record<string, string>,
  options: SpawnOptions = {},
): Promise<ServiceProcess> {
  const spawned = spawnService(env, options);
  return { ...spawned, url: await spawned.listening };
}

/** SIGKILL to every process of a service started with `ownGroup` (its workers, its embedded PostgreSQL), as a power cut. */
export function killGroup(service: SpawnedService): void {
  if (service.child.pid === undefined) return;
  try {
    process.kill(-service.child.pid, 'SIGKILL');
  } catch {
    // the group is gone already
  }
}

/** Kills a process the test started, if it still runs. */
export function killIfRunning(service: SpawnedService | undefined): void {
  if (service && service.child.exitCode === null && service.child.signalCode === null) service.child.kill('SIGKILL');
}

/** Runs one of the built CLI commands (`migrate`, `create-admin`) to completion. */
export function runCli(command: string, args: string[], dataDir: string, env: Record<string, string> = {}) {
  return run(process.execPath, [builtEntry(`server/cli/${command}`), ...args], {
    cwd: ROOT,
    env: environment({ DATA_DIR: dataDir, ...env }),
  });
}

/** One of the built CLI commands in a process of its own, to signal it midway; `lines` sees its stderr line by line. */
export function spawnCli(
  command: string,
  args: string[],
  dataDir: string,
  env: Record<string, string> = {},
  lines: (line: string) => void = () => undefined,
) {
  const child = spawn(process.execPath, [builtEntry(`server/cli/${command}`), ...args], {
    cwd: ROOT,
    env: environment({ DATA_DIR: dataDir, ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  createInterface({ input: child.stderr }).on('line', lines);
  child.stdout.resume();
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { child, exited, stderr: () => stderr };
}
