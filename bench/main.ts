// `npm run bench`: the service's throughput and latency per workload, beside what the runtime and
// the stack can do at most, all measured in this run on this machine. Prints a table; asserts nothing.
// See README "Benchmarks".
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { measureBaselines, type Baselines } from './baselines.js';
import { clientWeights } from './client.js';
import { measure, oddAnswers, type Timing } from './measure.js';
import { parseOptions } from './options.js';
import { nodeProcesses, processTree } from './rss.js';
import { seed, type Seeded } from './seed.js';
import { buildService, embeddedDatabaseUrl, freshExternalDatabase, startService, type RunningService } from './service.js';
import { formatTable, type Row } from './table.js';
import { buildWorkloads, taskReads, type Workload } from './workloads.js';

const options = parseOptions(process.argv.slice(2));
const timing: Timing = { connections: options.connections, warmupSeconds: options.warmupSeconds, seconds: options.seconds };
const started = Date.now();
const log = (message: string) => console.error(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${message}`);

/** Service processes that answer requests: the cluster workers, or the one process. */
async function workerCount(service: RunningService): Promise<number> {
  const processes = (await nodeProcesses(service.pid)).length;
  return processes > 1 ? processes - 1 : 1;
}

async function workloadRow(service: RunningService, workers: string, workload: Workload, baselines: Baselines): Promise<Row> {
  log(`${workload.name} (${workers} worker${workers === '1' ? '' : 's'})`);
  const window = { ...timing, seconds: Math.max(timing.seconds, workload.minSeconds ?? 0) };
  const m = await measure(service.url, service.pid, window, workload.requests, workload.probe);
  const r = m.result;
  const notes = [oddAnswers(r), m.probe ? `/healthz p99 ${m.probe.p99Ms.toFixed(1)} ms (${m.probe.errors} errors)` : ''];
  return {
    name: workload.name,
    workers,
    requestsPerSecond: r.requestsPerSecond,
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    errors: r.errors + (m.probe?.errors ?? 0),
    peakRssMiB: m.peakRssMiB,
    vsRuntime: r.requestsPerSecond / baselines.runtime,
    vsStack: r.requestsPerSecond / baselines.stack,
    vsArgon2: workload.login ? r.requestsPerSecond / baselines.argon2Verifies : null,
    note: notes.filter(Boolean).join('; '),
  };
}

/** GET /tasks/{id} with the other of 1 and 2 workers, when WEB_CONCURRENCY changes anything. */
async function otherWorkerCount(service: RunningService, workersBefore: number, seeded: Seeded, baselines: Baselines): Promise<Row[]> {
  try {
    const workers = await workerCount(service);
    log(`service: ${(await processTree(service.pid)).length} process(es) in its tree, ${workers} serving`);
    const [user] = seeded.users;
    if (!user) throw new Error('no users were seeded');
    if (workers !== workersBefore) return [await workloadRow(service, String(workers), { name: 'GET /tasks/{id}', requests: taskReads(seeded, user.token) }, baselines)];
    log(`WEB_CONCURRENCY made no difference (${workers} serving process(es) both times): no second GET /tasks/{id} row`);
    return [];
  } finally {
    await service.stop();
  }
}

async function main(): Promise<Row[]> {
  log(`${options.mode} run: ${options.seed.users} users × ${options.seed.tasksPerUser} tasks, ${timing.connections} connections, ${timing.warmupSeconds} s warm-up + ${timing.seconds} s per workload`);
  buildService();
  const dataDir = await mkdtemp(path.join(tmpdir(), 'task-bench-'));
  const external = process.env.DATABASE_URL ? await freshExternalDatabase(process.env.DATABASE_URL) : undefined;
  const services: RunningService[] = [];
  const start = async (workers: number) => {
    const service = await startService({ dataDir, databaseUrl: external?.url, workers });
    services.push(service);
    return service;
  };
  const rows: Row[] = [];
  const cleanUp = async () => {
    for (const s of services) await s.stop();
    await external?.drop();
    await rm(dataDir, { recursive: true, force: true });
  };
  // Ctrl-C: stop the service (and with it its PostgreSQL) and remove the scratch data before leaving.
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];
  for (const signal of signals) process.once(signal, () => void cleanUp().finally(() => process.exit(130)));
  try {
    const service = await start(options.workers);
    const databaseUrl = external?.url ?? (await embeddedDatabaseUrl(dataDir));
    const seeded = await seed(service.url, databaseUrl, options.seed);
    log(`seeded in ${seeded.seconds.toFixed(1)} s (attachment count ${seeded.storedAttachmentCount ? 'stored on tasks' : 'counted per read'})`);
    const workloads = (await buildWorkloads(service.url, seeded, options)).filter((w) => options.only === undefined || w.name.toLowerCase().includes(options.only));
    if (workloads.length === 0) throw new Error(`no workload's name contains "${options.only ?? ''}"`);
    const baselines = await measureBaselines(service.url, databaseUrl, seeded, timing, Math.min(options.seconds, 5));
    rows.push(...baselines.rows);

    const workers = await workerCount(service);
    log(`service: ${(await processTree(service.pid)).length} process(es) in its tree, ${workers} serving`);
    const label = workers === options.workers ? String(workers) : `${workers} (asked ${options.workers})`;
    for (const workload of workloads) rows.push(await workloadRow(service, label, workload, baselines));

    await service.stop();
    if (options.everything) rows.push(...(await otherWorkerCount(await start(options.workers === 1 ? 2 : 1), workers, seeded, baselines)));
    for (const s of services) for (const line of s.errorLines().slice(0, 20)) log(`service error log: ${line}`);
  } finally {
    await cleanUp();
  }
  return rows;
}

if (options.mode === 'client') {
  console.log(await clientWeights(log));
  process.exit(0);
}
const rows = await main();
console.log(formatTable(rows));
if (options.json) {
  await writeFile(options.json, `${JSON.stringify({ mode: options.mode, options, rows }, null, 2)}\n`);
  log(`wrote ${options.json}`);
}
