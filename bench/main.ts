// `npm run bench`: the service's throughput and latency per workload, beside what the runtime and
// the stack can do at most, all measured in this run on this machine. Prints a table; asserts nothing.
// See README "Benchmarks".
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { argon2Twin, baselineRow, measureBaselines, startStackBaseline, type Baselines } from './baselines.js';
import type { RunningBaseline } from './baselines/start.js';
import { clientWeights } from './client.js';
import { stopLoadGenerator } from './load/run.js';
import { measure, measureInTurns, oddAnswers, type Measured, type Timing } from './measure.js';
import { parseOptions } from './options.js';
import { nodeProcesses } from './rss.js';
import { seed } from './seed.js';
import {
  buildService,
  embeddedDatabaseUrl,
  freshExternalDatabase,
  startService,
  type RunningService,
} from './service.js';
import { formatTable, formatTargets, type Row } from './table.js';
import { TARGETS } from './targets.js';
import { buildWorkloads, type Workload } from './workloads.js';

const options = parseOptions(process.argv.slice(2));
const timing: Timing = {
  connections: options.connections,
  warmupSeconds: options.warmupSeconds,
  seconds: options.seconds,
};
const started = Date.now();
const log = (message: string) =>
  console.error(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${message}`);

/** Service processes that answer requests: the cluster workers, or the one process. */
async function workerCount(service: RunningService): Promise<number> {
  const processes = (await nodeProcesses(service.pid)).length;
  return processes > 1 ? processes - 1 : 1;
}

/** The workload on the service, in turns with its bare twin on the stack baseline (PATCH: right after it), and login between its argon2 twins. */
async function workloadRows(
  service: RunningService,
  workers: string,
  workload: Workload,
  baselines: Baselines,
  bare: RunningBaseline,
): Promise<Row[]> {
  const window = { ...timing, seconds: Math.max(timing.seconds, workload.minSeconds ?? 0) };
  const rows: Row[] = [];
  let bareRequestsPerSecond: number | undefined;
  const argon2Seconds = Math.max(5, timing.seconds);
  let argon2: Awaited<ReturnType<typeof argon2Twin>> | undefined;
  if (workload.login) {
    log(`bare: argon2id verifications${options.everything ? ', before the logins' : ''}`);
    argon2 = await argon2Twin(argon2Seconds, options.everything);
  }
  const label = `${workload.name} (${workers} worker${workers === '1' ? '' : 's'})`;
  const serviceTarget = { url: service.url, pid: service.pid, requests: workload.requests };
  let m: Measured | undefined;
  if (workload.bare) {
    const bareTarget = { url: bare.url, pid: bare.pid, requests: workload.bare.requests };
    // Loads whose requests carry nothing from one to the next: the twin and the service take turns
    // (measure.ts). A PATCH load learns each task's version as it goes, so it runs in one block.
    const inTurns = workload.requests.kind === 'rotate' && workload.bare.requests.kind === 'rotate' && !workload.probe;
    let bareMeasured: Measured | undefined;
    if (inTurns) {
      log(`${label} and bare ${workload.name}, in turns`);
      [bareMeasured, m] = await measureInTurns([bareTarget, serviceTarget], window);
    } else {
      log(`bare ${workload.name}`);
      bareMeasured = await measure(bare.url, bare.pid, window, bareTarget.requests);
    }
    if (!bareMeasured) throw new Error(`bare ${workload.name} measured nothing`);
    bareRequestsPerSecond = bareMeasured.result.requestsPerSecond;
    rows.push({
      ...baselineRow(`bare ${workload.name}`, bareMeasured),
      vsRuntime: bareMeasured.result.requestsPerSecond / baselines.runtime,
    });
  }
  if (!m) {
    log(label);
    m = await measure(service.url, service.pid, window, serviceTarget.requests, workload.probe);
  }
  if (argon2) {
    if (options.everything) log('bare: argon2id verifications, after the logins');
    const twin = await argon2.after();
    bareRequestsPerSecond = twin.verifiesPerSecond;
    rows.push(twin.row);
  }
  const r = m.result;
  const notes = [
    oddAnswers(r),
    m.probe ? `/healthz p99 ${m.probe.p99Ms.toFixed(1)} ms (${m.probe.errors} errors)` : '',
  ];
  const target = workload.login ? TARGETS.login : workload.bare?.target;
  const [vsBare, shown] =
    bareRequestsPerSecond && target !== undefined
      ? [r.requestsPerSecond / bareRequestsPerSecond, target]
      : [null, null];
  rows.push({
    name: workload.name,
    workers,
    requestsPerSecond: r.requestsPerSecond,
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    errors: r.errors + (m.probe?.errors ?? 0),
    peakRssMiB: m.peakRssMiB,
    vsRuntime: r.requestsPerSecond / baselines.runtime,
    vsBare,
    target: shown,
    service: true,
    note: notes.filter(Boolean).join('; '),
  });
  return rows;
}

/** GET /tasks/{id} with the other of 1 and 2 workers, when WEB_CONCURRENCY changes anything. */
async function otherWorkerCount(
  service: RunningService,
  workersBefore: number,
  workloads: Workload[],
  baselines: Baselines,
  bare: RunningBaseline,
): Promise<Row[]> {
  try {
    const workers = await workerCount(service);
    log(`service: ${(await nodeProcesses(service.pid)).length} Node.js process(es) in its tree, ${workers} serving`);
    const reads = workloads.find((workload) => workload.name === 'GET /tasks/{id}');
    // Awaited here: the finally below stops the service, which must outlive the row.
    if (reads && workers !== workersBefore) return await workloadRows(service, String(workers), reads, baselines, bare);
    log(
      `WEB_CONCURRENCY made no difference (${workers} serving process(es) both times): no second GET /tasks/{id} row`,
    );
    return [];
  } finally {
    await service.stop();
  }
}

/** The rows, and the main run's worker label as its rows carry it (the targets are judged on those). */
async function main(): Promise<{ rows: Row[]; workers: string }> {
  log(
    `${options.mode} run: ${options.seed.users} users × ${options.seed.tasksPerUser} tasks, ${timing.connections} connections, ${timing.warmupSeconds} s warm-up + ${timing.seconds} s per workload`,
  );
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
  let mainLabel: string | undefined;
  let stopBare: (() => Promise<void>) | undefined;
  const cleanUp = async () => {
    await stopBare?.();
    await stopLoadGenerator();
    for (const s of services) await s.stop();
    await external?.drop();
    await rm(dataDir, { recursive: true, force: true });
  };
  // Ctrl-C: stop the service (and with it its PostgreSQL) and remove the scratch data before leaving.
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];
  for (const signal of signals) process.once(signal, () => void cleanUp().finally(() => process.exit(130)));
  try {
    const service = await start(options.workers);
    log(`service ready (${external ? 'DATABASE_URL' : 'embedded PostgreSQL'})`);
    const databaseUrl = external?.url ?? (await embeddedDatabaseUrl(dataDir));
    const seeded = await seed(service.url, databaseUrl, options.seed);
    log(
      `seeded in ${seeded.seconds.toFixed(1)} s (attachment count ${seeded.storedAttachmentCount ? 'stored on tasks' : 'counted per read'})`,
    );
    const bare = await startStackBaseline(service.url, databaseUrl, seeded);
    stopBare = bare.stop;
    const workloads = (await buildWorkloads({ service: service.url, bare: bare.url }, seeded, options)).filter(
      (w) => options.only === undefined || w.name.toLowerCase().includes(options.only),
    );
    if (workloads.length === 0) throw new Error(`no workload's name contains "${options.only ?? ''}"`);
    log('workloads ready: the runtime baseline');
    const baselines = await measureBaselines(seeded, timing);
    rows.push(...baselines.rows);

    const workers = await workerCount(service);
    log(`service: ${(await nodeProcesses(service.pid)).length} Node.js process(es) in its tree, ${workers} serving`);
    const label = workers === options.workers ? String(workers) : `${workers} (asked ${options.workers})`;
    mainLabel = label;
    for (const workload of workloads) rows.push(...(await workloadRows(service, label, workload, baselines, bare)));

    await service.stop();
    if (options.everything && workloads.some((w) => w.name === 'GET /tasks/{id}'))
      rows.push(
        ...(await otherWorkerCount(await start(options.workers === 1 ? 2 : 1), workers, workloads, baselines, bare)),
      );
    for (const s of services) for (const line of s.errorLines().slice(0, 20)) log(`service error log: ${line}`);
  } finally {
    await cleanUp();
  }
  return { rows, workers: mainLabel ?? String(options.workers) };
}

if (options.mode === 'client') {
  console.log(await clientWeights(log));
  process.exit(0);
}
const { rows, workers } = await main();
console.log(formatTable(rows));
console.log(`\n${formatTargets(rows, TARGETS.rssMiB, workers)}`);
if (options.json) {
  await writeFile(options.json, `${JSON.stringify({ mode: options.mode, options, rows }, null, 2)}\n`);
  log(`wrote ${options.json}`);
}
