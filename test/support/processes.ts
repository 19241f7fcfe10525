import { execFile, spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';

// The service as an operator runs it: the production build (`npm start` runs dist/server/main.js;
// `npm test` builds it first) in a process of its own.
export const ROOT = path.resolve(import.meta.dirname, '..', '..');
const run = promisify(execFile);

function environment(dataDir: string, env: Record<string, string>): NodeJS.ProcessEnv {
  return {
    ...process.env,
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: '',
    LOG_LEVEL: 'info',
    ...env,
  };
}

/**
 * `node dist/server/main.js` on `dataDir` (the embedded database unless `env` says otherwise).
 * `ownGroup`: in a process group of its own (as a terminal gives it), so that one kill reaches its workers.
 */
export function spawnService(
  dataDir: string,
  env: Record<string, string> = {},
  { ownGroup = false }: { ownGroup?: boolean } = {},
) {
  const child = spawn(process.execPath, ['dist/server/main.js'], {
    cwd: ROOT,
    env: environment(dataDir, env),
    detached: ownGroup,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    if (stdout.length < 100_000) stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // 'close' comes after the output streams end, so the output is complete by then.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { child, exited, stdout: () => stdout, stderr: () => stderr };
}

export type SpawnedService = ReturnType<typeof spawnService>;

/** Spawns the service and waits until it says where it listens. */
export function startProcess(
  dataDir: string,
  env: Record<string, string> = {},
  options: { ownGroup?: boolean } = {},
): Promise<SpawnedService & { url: string }> {
  const spawned = spawnService(dataDir, env, options);
  return new Promise((resolve, reject) => {
    createInterface({ input: spawned.child.stdout }).on('line', (line) => {
      const match = /listening on (http:\/\/[^"]+)/.exec(line);
      if (match?.[1]) resolve({ ...spawned, url: match[1] });
    });
    void spawned.exited.then((code) => reject(new Error(`exited with ${code}: ${spawned.stderr()}`)));
  });
}

/** Runs one of the built CLI commands (`migrate`, `create-admin`) to completion. */
export function runCli(command: string, args: string[], dataDir: string, env: Record<string, string> = {}) {
  return run(process.execPath, [`dist/server/cli/${command}.js`, ...args], {
    cwd: ROOT,
    env: environment(dataDir, env),
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
  const child = spawn(process.execPath, [`dist/server/cli/${command}.js`, ...args], {
    cwd: ROOT,
    env: environment(dataDir, env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  createInterface({ input: child.stderr }).on('line', lines);
  child.stdout.resume();
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { child, exited, stderr: () => stderr };
}
