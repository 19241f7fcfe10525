// `npm run bench`: the service's throughput and latency per workload, each beside its bare twin doing
// the same work, measured in turns in this run on this machine, on the embedded PostgreSQL or on
// `--database-url`'s server. Prints a table with PASS or MISS per row; with `--strict`, exits 1 unless
// every row passed. See docs/benchmarks.md.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { argon2Twin, baselineRow, measureBaselines, startStackBaseline, type Baselines } from './baselines.js';
import type { RunningBaseline } from './baselines/start.js';
import { clientWeights } from './client.js';
import { stopLoadGenerator } from './load/run.js';
import pg from 'pg';
import { measure, measureInTurns, oddAnswers, turnRequests, type Measured, type Timing } from './measure.js';
import { parseOptions } from './options.js';
import { nodeProcesses, rssMiB } from './rss.js';
import { seed } from './seed.js';
import {
  buildService,
  embeddedDatabaseUrl,
  freshExternalDatabase,
  startService,
  type RunningService,
} from './service.js';
import { formatTable, formatTargets, memoryRow, type Row } from './table.js';
import { TARGETS } from './targets.js';
import { buildWorkloads, type Versions, type Workload } from './workloads.js';

const options = parseOptions(process.argv.slice(2));
const timing: Timing = {
  connections: options.connections,
  warmupSeconds: options.warmupSeconds,
  seconds: options.seconds,
};
const started = Date.now();
const log = (message: string) =>
  console.error(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${message}`);

/** The service's own Node.js processes: the tree under npm (the root), npm itself left out. */
async function serviceProcesses(service: RunningService): Promise<number[]> {
  return (await nodeProcesses(service.pid)).filter((pid) => !service.viaNpm || pid !== service.pid);
}

/** Service processes that answer requests: the cluster workers, or the one process. */
async function workerCount(service: RunningService): Promise<number> {
  const processes = (await serviceProcesses(service)).length;
  return processes > 1 ? processes - 1 : 1;
}

/** The tasks' versions as the database has them now. */
function versionReader(pool: pg.Pool): Versions {
  return async (ids) => {
    const { rows } = await pool.query<{ id: string; version: number }>(
      'SELECT id, version FROM tasks WHERE id = ANY($1::uuid[])',
      [ids],
    );
    return new Map(rows.map((row) => [row.id, row.version]));
  };
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
    // The twin and the service take turns (measure.ts); a PATCH load reads its tasks' versions
    // afresh at each turn.
    const inTurns = !workload.probe;
    let bareMeasured: Measured | undefined;
    if (inTurns) {
      log(`${label} and bare ${workload.name}, in turns`);
      [bareMeasured, m] = await measureInTurns([bareTarget, serviceTarget], window);
    } else {
      log(`bare ${workload.name}`);
      bareMeasured = await measure(bare.url, bare.pid, window, await turnRequests(bareTarget.requests));
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
    m = await measure(service.url, service.pid, window, await turnRequests(serviceTarget.requests), workload.probe);
  }
  if (argon2) {
    if (options.everything) log('bare: argon2id verifications, after the logins');
    const twin = await argon2.after();
    bareRequestsPerSecond = twin.verifiesPerSecond;
    rows.push(twin.row);
  }
  const r = m.result;
  const notes = [
    `CPU ${m.cpuMsPerAnswer.toFixed(2)} ms/answer`,
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
    ...(workload.login && { login: true }),
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
    log(`service: ${(await serviceProcesses(service)).length} Node.js process(es) under npm, ${workers} serving`);
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
  const external = options.databaseUrl ? await freshExternalDatabase(options.databaseUrl) : undefined;
  const services: RunningService[] = [];
  const start = async (workers: number) => {
    const service = await startService({ dataDir, databaseUrl: external?.url, workers });
    services.push(service);
    return service;
  };
  const rows: Row[] = [];
  let mainLabel: string | undefined;
  let stopBare: (() => Promise<void>) | undefined;
  let versionsPool: pg.Pool | undefined;
  const cleanUp = async () => {
    await stopBare?.();
    await versionsPool?.end();
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
    log(`service ready (${external ? `a fresh database on ${new URL(external.url).host}` : 'embedded PostgreSQL'})`);
    const databaseUrl = external?.url ?? (await embeddedDatabaseUrl(dataDir));
    const seeded = await seed(service.url, databaseUrl, options.seed);
    log(
      `seeded in ${seeded.seconds.toFixed(1)} s (attachment count ${seeded.storedAttachmentCount ? 'stored on tasks' : 'counted per read'})`,
    );
    const bare = await startStackBaseline(service.url, databaseUrl, seeded);
    stopBare = bare.stop;
    versionsPool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
    versionsPool.on('error', () => {});
    const versions = versionReader(versionsPool);
    const workloads = (
      await buildWorkloads({ service: service.url, bare: bare.url }, seeded, options, versions)
    ).filter((w) => options.only === undefined || options.only.some((name) => w.name.toLowerCase().includes(name)));
    if (workloads.length === 0) throw new Error(`no workload's name contains "${options.only?.join('" or "') ?? ''}"`);
    log('workloads ready: the runtime baseline');
    const baselines = await measureBaselines(seeded, timing);
    rows.push(...baselines.rows);

    const workers = await workerCount(service);
    log(`service: ${(await serviceProcesses(service)).length} Node.js process(es) under npm, ${workers} serving`);
    const label = workers === options.workers ? String(workers) : `${workers} (asked ${options.workers})`;
    mainLabel = label;
    for (const workload of workloads) rows.push(...(await workloadRows(service, label, workload, baselines, bare)));
    // npm's own share of the tree's memory, for the memory row's note.
    const npmMiB = service.viaNpm ? rssMiB(service.pid) : 0;
    rows.push(memoryRow(rows, label, TARGETS.rssMiB, npmMiB));

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
const targets = formatTargets(rows, workers);
console.log(`\n${targets.text}`);
if (options.json) {
  // The URL may hold a password: the file says only whether one was given.
  const shown = { ...options, databaseUrl: options.databaseUrl === undefined ? undefined : 'given' };
  await writeFile(options.json, `${JSON.stringify({ mode: options.mode, options: shown, rows }, null, 2)}\n`);
  log(`wrote ${options.json}`);
}
// Noise on a shared machine can miss a target: only --strict makes a miss the exit code.
if (options.strict && !targets.allPassed) {
  log('--strict: a row missed its target');
  process.exitCode = 1;
}
