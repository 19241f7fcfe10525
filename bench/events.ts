// `npx tsx bench/events.ts`: what the event system costs. Prints, asserts nothing (shared, noisy machines):
//  1. the outbox's write overhead: the same task insert in a transaction with and without its event
//     (and webhook fan-out) statement, interleaved in one run; plus POST /tasks over HTTP for scale;
//  2. webhook delivery latency from the event's commit to a receiver on loopback, p50/p99;
//  3. the server's memory for 1,000 idle SSE streams (clients in a child process).
//   BENCH_WRITES (default 1000), BENCH_DELIVERIES (300), BENCH_STREAMS (1000); DATABASE_URL for PostgreSQL.
import { fork } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { v7 as uuidv7 } from 'uuid';
import { AuthResultSchema } from '../contract/auth.js';
import { EventSchema } from '../contract/events.js';
import { buildApp } from '../server/app.js';
import { createContext } from '../server/bootstrap.js';
import { loadConfig } from '../server/config.js';
import { openDatabase } from '../server/db/database.js';
import { tables } from '../server/db/query.js';
import { migrate } from '../server/db/migrate.js';
import { taskCreated } from '../server/tasks/events.js';
import { recordEvent } from '../server/events/outbox.js';
import { readTasksById } from '../server/tasks/store.js';
import { startDeliveryWorker } from '../server/webhooks/worker.js';

const WRITES = Number(process.env.BENCH_WRITES ?? 1000);
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 300);
const STREAMS = Number(process.env.BENCH_STREAMS ?? 1000);

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? NaN;
const ms = (n: number) => `${n.toFixed(2)} ms`;
const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

async function main(): Promise<void> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'bench-events-'));
  const config = loadConfig({
    ...process.env,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '0',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  });
  const db = await openDatabase(config);
  try {
    await migrate(db.sql);
    const ctx = await createContext(config, db, pino({ level: 'silent' }));
    const server = http.createServer(buildApp(ctx)).listen(0, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    const baseUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    const reg = await fetch(`${baseUrl}/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        email: `bench-${uuidv7()}@example.test`,
        name: 'Bench',
        password: 'correct horse battery',
      }),
    });
    const user = AuthResultSchema.parse(await reg.json());
    const auth = `Bearer ${user.accessToken}`;

    // 1. Outbox overhead: the same insert, with and without its event statement, alternating.
    const timings: Record<'without' | 'with', number[]> = { without: [], with: [] };
    for (let i = 0; i < WRITES; i++) {
      for (const mode of i % 2 === 0 ? (['without', 'with'] as const) : (['with', 'without'] as const)) {
        const started = performance.now();
        await db.sql.transaction(async (tx) => {
          const now = new Date();
          const id = uuidv7();
          await tx.write(
            tables
              .insertInto('tasks')
              .values({ id, owner_id: user.user.id, title: `bench ${mode}`, created_at: now, updated_at: now }),
          );
          const [task] = await readTasksById(tx, [id]);
          if (mode === 'with' && task) await recordEvent(tx, user.user.id, taskCreated(task));
        });
        timings[mode].push(performance.now() - started);
      }
    }
    for (const mode of ['without', 'with'] as const) timings[mode].sort((a, b) => a - b);
    const http201: number[] = [];
    for (let i = 0; i < Math.min(WRITES, 300); i++) {
      const started = performance.now();
      await fetch(`${baseUrl}/tasks`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'bench http' }),
      });
      http201.push(performance.now() - started);
    }
    http201.sort((a, b) => a - b);
    console.log(`1. task insert transaction, ${WRITES} each, interleaved:`);
    for (const mode of ['without', 'with'] as const)
      console.log(`   ${mode.padEnd(7)} outbox: p50 ${ms(pct(timings[mode], 50))}  p99 ${ms(pct(timings[mode], 99))}`);
    console.log(
      `   overhead p50 ${ms(pct(timings.with, 50) - pct(timings.without, 50))}; POST /tasks over HTTP (with outbox, sequential): p50 ${ms(pct(http201, 50))} p99 ${ms(pct(http201, 99))}`,
    );

    // 2. Delivery latency: event commit (occurredAt) to arrival at a loopback receiver.
    const lags: number[] = [];
    const receiver = http
      .createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const event = EventSchema.parse(JSON.parse(Buffer.concat(chunks).toString('utf8')));
          lags.push(Date.now() - new Date(event.occurredAt).getTime());
          res.end();
        });
      })
      .listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    const raddr = receiver.address();
    await fetch(`${baseUrl}/webhooks`, {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        url: `http://127.0.0.1:${typeof raddr === 'object' && raddr ? raddr.port : 0}/hook`,
        events: ['task.created'],
      }),
    });
    const stopWorker = startDeliveryWorker(ctx);
    for (let i = 0; i < DELIVERIES; i++) {
      await fetch(`${baseUrl}/tasks`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'delivered' }),
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    while (lags.length < DELIVERIES) await new Promise((resolve) => setTimeout(resolve, 50));
    await stopWorker();
    receiver.close();
    lags.sort((a, b) => a - b);
    console.log(
      `2. webhook delivery, event time to receiver, ${DELIVERIES} events (one every ~20 ms): p50 ${lags[Math.floor(lags.length / 2)]} ms  p99 ${pct(lags, 99)} ms`,
    );

    // 3. Memory of idle streams, measured in this (server) process; the clients live in a child.
    global.gc?.();
    const before = process.memoryUsage();
    const child = fork(new URL(import.meta.url).pathname, ['clients', baseUrl, auth, String(STREAMS)], {
      execArgv: process.execArgv,
    });
    await once(child, 'message');
    await new Promise((resolve) => setTimeout(resolve, 2000));
    global.gc?.();
    const after = process.memoryUsage();
    console.log(
      `3. ${STREAMS} idle SSE streams: server RSS ${mib(before.rss)} -> ${mib(after.rss)} (+${mib(after.rss - before.rss)}), heap used +${mib(after.heapUsed - before.heapUsed)}; ` +
        `per stream ~${((after.rss - before.rss) / STREAMS / 1024).toFixed(1)} KiB RSS`,
    );
    child.send('exit');
    server.closeAllConnections();
    server.close();
  } finally {
    await db.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'clients') {
  // The child: opens idle streams and reports when all are open.
  const [baseUrl, auth, count] = [process.argv[3] ?? '', process.argv[4] ?? '', Number(process.argv[5])];
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  let open = 0;
  for (let i = 0; i < count; i++) {
    http.get(`${baseUrl}/events`, { agent, headers: { Authorization: auth } }, (res) => {
      res.once('data', () => {
        if (++open === count) process.send?.('open');
      });
    });
  }
  process.on('message', () => process.exit(0));
} else {
  await main();
}
