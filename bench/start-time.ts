// `npm run bench:start`: how long `npm start` on a built, unchanged checkout takes to answer
// /healthz, and how long its whole process tree takes to stop on SIGTERM to its process group.
// The data directory is initialised by a first start that is not counted. Prints; asserts nothing.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');
const RUNS = Number(process.argv[2] ?? 5);
/** WEB_CONCURRENCY for the runs (`npm run bench:start -- RUNS WORKERS`); the service's default when not given. */
const WORKERS = process.argv[3];

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  return typeof address === 'object' && address ? address.port : 0;
}

async function healthy(url: string): Promise<boolean> {
  return fetch(url).then(
    (res) => res.status === 200,
    () => false,
  );
}

// The caller's own WEB_CONCURRENCY does not leak in: the runs measure the default unless told.
const environment = Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'WEB_CONCURRENCY'));

/** One `npm start`: milliseconds to the first 200 from /healthz, then to the end of the tree after SIGTERM. */
async function startOnce(dataDir: string): Promise<{ upMs: number; downMs: number }> {
  const port = await freePort();
  const begun = performance.now();
  const child = spawn('npm', ['start', '--silent'], {
    cwd: ROOT,
    detached: true, // its own process group, signalled as a terminal or a supervisor would
    env: {
      ...environment,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      DATABASE_URL: '',
      LOG_LEVEL: 'warn',
      ...(WORKERS && { WEB_CONCURRENCY: WORKERS }),
    },
    stdio: 'ignore',
  });
  const exited = once(child, 'exit');
  while (!(await healthy(`http://127.0.0.1:${port}/healthz`))) {
    if (child.exitCode !== null) throw new Error(`npm start exited with ${child.exitCode}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const upMs = performance.now() - begun;
  const signalled = performance.now();
  if (child.pid) process.kill(-child.pid, 'SIGTERM');
  await exited;
  return { upMs, downMs: performance.now() - signalled };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;

const dataDir = await mkdtemp(path.join(tmpdir(), 'task-service-start-'));
await chmod(dataDir, 0o711);
try {
  const first = await startOnce(dataDir);
  console.log(`first start (initdb, migrations): ${first.upMs.toFixed(0)} ms to /healthz`);
  const runs = [];
  for (let i = 0; i < RUNS; i++) runs.push(await startOnce(dataDir));
  const ups = runs.map((r) => r.upMs);
  const downs = runs.map((r) => r.downMs);
  console.log(
    `npm start, built and unchanged: median ${median(ups).toFixed(0)} ms to /healthz (min ${Math.min(...ups).toFixed(0)}, max ${Math.max(...ups).toFixed(0)}; ${RUNS} runs)`,
  );
  console.log(
    `SIGTERM to the process group: median ${median(downs).toFixed(0)} ms until npm exited (max ${Math.max(...downs).toFixed(0)})`,
  );
} finally {
  await rm(dataDir, { recursive: true, force: true });
}
