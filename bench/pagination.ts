// `npm run bench`: what a deep page of GET /tasks costs against the first page, over HTTP, with an
// OFFSET query at the same depth as the baseline measured in the same run. Prints its figures;
// asserts nothing (these machines are shared and noisy).
//   BENCH_TASKS (default 20000), BENCH_LIMIT (20), BENCH_SAMPLES (15); DATABASE_URL for PostgreSQL.
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { v7 as uuidv7 } from 'uuid';
import { z } from 'zod';
import { AuthResultSchema } from '../contract/auth.js';
import { buildApp } from '../server/app.js';
import { createContext } from '../server/bootstrap.js';
import { loadConfig } from '../server/config.js';
import { openDatabase } from '../server/db/database.js';
import { migrate } from '../server/db/migrate.js';

const TASKS = Number(process.env.BENCH_TASKS ?? 20_000);
const LIMIT = Number(process.env.BENCH_LIMIT ?? 20);
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 15);

const PageSchema = z.object({ nextCursor: z.string().nullable() });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

const dataDir = await mkdtemp(path.join(tmpdir(), 'task-bench-'));
const config = loadConfig({ ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'silent', RATE_LIMIT_PER_MINUTE: '0' });
const db = await openDatabase(config);
try {
  await migrate(db.sql);
  const ctx = await createContext(config, db, pino({ level: 'silent' }));
  const server = buildApp(ctx).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening on TCP');
  const base = `http://127.0.0.1:${address.port}`;

  const reg = await fetch(`${base}/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'bench@example.test', password: 'benchmark password', name: 'Bench' }),
  });
  const { accessToken, user } = AuthResultSchema.parse(await reg.json());
  const headers = { authorization: `Bearer ${accessToken}` };

  console.log(`database: ${db.kind}; seeding ${TASKS} tasks…`);
  const start = Date.now();
  const priorities = ['low', 'medium', 'high', 'urgent'] as const;
  for (let i = 0; i < TASKS; i += 1000) {
    const now = Date.now();
    await db.prisma.task.createMany({
      data: Array.from({ length: Math.min(1000, TASKS - i) }, (_, j) => ({
        id: uuidv7(),
        ownerId: user.id,
        title: `Task ${i + j}`,
        priority: priorities[(i + j) % 4],
        dueAt: (i + j) % 3 === 0 ? null : new Date(now + (i + j) * 60_000),
        createdAt: new Date(now - (TASKS - i - j) * 1000),
        updatedAt: new Date(now),
      })),
    });
  }
  console.log(`seeded in ${((Date.now() - start) / 1000).toFixed(1)} s`);

  for (const sort of ['-createdAt', 'dueAt', 'priority'] as const) {
    // Walk every page once to learn the cursors, then time the first and the deepest pages.
    const cursors: string[] = [];
    let cursor: string | null = null;
    do {
      const url: string = `${base}/tasks?limit=${LIMIT}&sort=${sort}${cursor ? `&cursor=${cursor}` : ''}`;
      const page = PageSchema.parse(await (await fetch(url, { headers })).json());
      cursor = page.nextCursor;
      if (cursor) cursors.push(cursor);
    } while (cursor);
    const deepest = cursors[cursors.length - 1];
    const depth = cursors.length;
    const first: number[] = [];
    const deep: number[] = [];
    for (let s = 0; s < SAMPLES; s++) {
      first.push(await timed(() => fetch(`${base}/tasks?limit=${LIMIT}&sort=${sort}`, { headers }).then((r) => r.arrayBuffer())));
      deep.push(await timed(() => fetch(`${base}/tasks?limit=${LIMIT}&sort=${sort}&cursor=${deepest}`, { headers }).then((r) => r.arrayBuffer())));
    }
    // Baseline: the same page fetched with OFFSET, as an offset-paginated API would.
    const direction = sort.startsWith('-') ? 'desc' : 'asc';
    const field = sort.replace('-', '');
    const offsetFirst: number[] = [];
    const offsetDeep: number[] = [];
    for (let s = 0; s < SAMPLES; s++) {
      const query = (skip: number) => db.prisma.task.findMany({ where: { ownerId: user.id }, orderBy: [{ [field]: direction }, { id: direction }], skip, take: LIMIT + 1 });
      offsetFirst.push(await timed(() => query(0)));
      offsetDeep.push(await timed(() => query(depth * LIMIT)));
    }
    const f = median(first), d = median(deep), of = median(offsetFirst), od = median(offsetDeep);
    console.log(
      `sort=${sort.padEnd(10)} page 1: ${f.toFixed(2)} ms  page ${depth + 1}: ${d.toFixed(2)} ms  deep/first ${(d / f).toFixed(2)}x` +
        `   | OFFSET baseline (query only) first ${of.toFixed(2)} ms, deep ${od.toFixed(2)} ms, ${(od / of).toFixed(2)}x`,
    );
  }
  server.close();
} finally {
  await db.close();
  await rm(dataDir, { recursive: true, force: true });
}
