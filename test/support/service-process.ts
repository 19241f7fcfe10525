import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');

export interface ServiceProcess {
  child: ChildProcess;
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Resolves with the exit code (null when killed by a signal) once output is complete. */
  exited: Promise<number | null>;
  stdout(): string;
  stderr(): string;
}

/**
 * `server/main.ts` as an operator runs it, in a process of its own on an ephemeral port; resolves
 * once it says where it listens. `env` is added to this process's environment. `ownGroup`: in a
 * process group of its own (as a terminal gives it), so that killGroup reaches all of it.
 */
export function startServiceProcess(
  env: Record<string, string>,
  { ownGroup = false }: { ownGroup?: boolean } = {},
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/main.ts'], {
    cwd: ROOT,
    detached: ownGroup,
    // One process by default: a signal or a kill reaches the process that serves, and its memory is the service's.
    env: {
      ...process.env,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      RATE_LIMIT_PER_MINUTE: '0',
      WEB_CONCURRENCY: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    if (!child.stdout) return reject(new Error('no stdout'));
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (stdout.length < 100_000) stdout += `${line}\n`;
      const match = /listening on (http:\/\/[^"]+)/.exec(line);
      if (match?.[1]) resolve({ child, url: match[1], exited, stdout: () => stdout, stderr: () => stderr });
    });
    void exited.then((code) => reject(new Error(`exited with ${code}: ${stderr}`)));
  });
}

/** SIGKILL to every process of a service started with `ownGroup` (its workers, its embedded PostgreSQL), as a power cut. */
export function killGroup(service: ServiceProcess): void {
  if (service.child.pid === undefined) return;
  try {
    process.kill(-service.child.pid, 'SIGKILL');
  } catch {
    // the group is gone already
  }
}

/** Kills a process the test started, if it still runs. */
export function killIfRunning(service: ServiceProcess | undefined): void {
  if (service && service.child.exitCode === null && service.child.signalCode === null) service.child.kill('SIGKILL');
}
