// `npm run bench`: what the deepest page of GET /tasks costs against the first, keyset against OFFSET.
// Per sort it times page 1 and the last page (a) over HTTP, as a client sees them, and (b) through
// the query the service runs (same where, orderBy and include), once with the keyset cursor and once
// with OFFSET, so that the two ratios compare like with like. Prints medians; asserts nothing (these
// machines are shared and noisy).
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
import { TaskPrioritySchema, type TaskSort } from '../contract/tasks.js';
import { buildApp } from '../server/app.js';
import { accessClaimsOf, principalFor } from '../server/auth/sessions.js';
import { createContext } from '../server/bootstrap.js';
import { loadConfig } from '../server/config.js';
import { openDatabase } from '../server/db/database.js';
import { migrate } from '../server/db/migrate.js';
import type { Prisma } from '../server/generated/prisma/client.js';
import { encodeCursor } from '../server/http/pagination.js';
import { taskAfter, taskCursor, taskOrderBy, taskVisibleTo } from '../server/tasks/queries.js';
import { taskInclude } from '../server/tasks/serialize.js';

const TASKS = Number(process.env.BENCH_TASKS ?? 20_000);
const LIMIT = Number(process.env.BENCH_LIMIT ?? 20);
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 15);
const SORTS: TaskSort[] = ['-createdAt', 'dueAt', 'priority'];
if (!(TASKS > LIMIT && LIMIT >= 1 && SAMPLES >= 1)) throw new Error('BENCH_TASKS must exceed BENCH_LIMIT, and both BENCH_LIMIT and BENCH_SAMPLES be at least 1');
const PAGES = Math.ceil(TASKS / LIMIT);
const DEEP_SKIP = (PAGES - 1) * LIMIT;

const PageSchema = z.object({ items: z.array(z.object({ id: z.string() })), nextCursor: z.string().nullable() });
interface TimedPath {
  name: string;
  first: () => Promise<unknown>;
  deep: () => Promise<unknown>;
  firstMs: number[];
  deepMs: number[];
}
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

  // A new account per run, so that a database used before still shows this run's tasks only.
  const reg = await fetch(`${base}/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: `bench-${uuidv7()}@example.test`, password: 'benchmark password', name: 'Bench' }),
  });
  const { accessToken, user } = AuthResultSchema.parse(await reg.json());
  const authorization = `Bearer ${accessToken}`;
  const getJson = async (url: string) => (await fetch(url, { headers: { authorization } })).json();
  // The principal the auth middleware derives from this token, hence the same visibility rule.
  const visible = taskVisibleTo(await principalFor(ctx, await accessClaimsOf(ctx, authorization)));

  console.log(`database: ${db.kind}; seeding ${TASKS} tasks…`);
  const seedStart = performance.now();
  const priorities = TaskPrioritySchema.options;
  for (let i = 0; i < TASKS; i += 1000) {
    const now = Date.now();
    await db.prisma.task.createMany({
      data: Array.from({ length: Math.min(1000, TASKS - i) }, (_, j) => ({
        id: uuidv7(),
        ownerId: user.id,
        title: `Task ${i + j}`,
        priority: priorities[(i + j) % priorities.length],
        // A third without a due date, so that the nulls-last ordering of dueAt is exercised.
        dueAt: (i + j) % 3 === 0 ? null : new Date(now + (i + j) * 60_000),
        createdAt: new Date(now - (TASKS - i - j) * 1000),
        updatedAt: new Date(now),
      })),
    });
  }
  // Fresh statistics, as autovacuum would give them in time (a fresh database has none yet): else the planner
  // takes the table for empty and sorts every visible task even for page 1.
  await db.sql.exec('ANALYZE tasks');
  console.log(`seeded and analyzed in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`);
  console.log(
    `limit ${LIMIT}: page 1 against page ${PAGES} of ${PAGES} (after ${DEEP_SKIP} tasks); median of ${SAMPLES} samples; ` +
      'Prisma rows are the service query: taskVisibleTo + taskOrderBy + taskInclude, take limit+1',
  );
  console.log(`${'sort'.padEnd(11)} ${'path'.padEnd(14)} ${'page 1'.padStart(10)} ${`page ${PAGES}`.padStart(10)} ${'deep/first'.padStart(10)}`);

  for (const sort of SORTS) {
    const orderBy = taskOrderBy(sort);
    const query = (where: Prisma.TaskWhereInput[], skip?: number) =>
      db.prisma.task.findMany({ where: { AND: [visible, ...where] }, orderBy, skip, take: LIMIT + 1, include: taskInclude });
    // The cursor toPage issues for the last row of page PAGES - 1, which leads to the last page.
    const before = await db.prisma.task.findFirst({ where: visible, orderBy, skip: DEEP_SKIP - 1, include: taskInclude });
    if (!before) throw new Error(`fewer than ${DEEP_SKIP} tasks are visible`);
    const cursor = taskCursor(sort, before);
    const after = [taskAfter(sort, cursor)];
    const firstUrl = `${base}/tasks?limit=${LIMIT}&sort=${sort}`;
    const deepUrl = `${firstUrl}&cursor=${encodeCursor(cursor)}`;

    // Not a check on the service: it says whether the three deep pages are really the same page.
    const httpDeep = PageSchema.parse(await getJson(deepUrl));
    const keysetDeep = await query(after);
    const offsetDeep = await query([], DEEP_SKIP);
    const ids = (rows: { id: string }[]) => rows.map((r) => r.id).join();
    const same = ids(httpDeep.items) === ids(keysetDeep) && ids(keysetDeep) === ids(offsetDeep);
    const pageNote = `${httpDeep.items.length} tasks, ${httpDeep.nextCursor === null ? 'last page' : 'NOT the last page'}`;

    const paths: TimedPath[] = [
      { name: 'HTTP keyset', first: () => getJson(firstUrl), deep: () => getJson(deepUrl), firstMs: [], deepMs: [] },
      { name: 'Prisma keyset', first: () => query([]), deep: () => query(after), firstMs: [], deepMs: [] },
      { name: 'Prisma OFFSET', first: () => query([], 0), deep: () => query([], DEEP_SKIP), firstMs: [], deepMs: [] },
    ];
    // Round 0 warms up and is dropped; the paths alternate so that drift hits them alike.
    for (let s = 0; s <= SAMPLES; s++) {
      for (const p of paths) {
        const first = await timed(p.first);
        const deep = await timed(p.deep);
        if (s === 0) continue;
        p.firstMs.push(first);
        p.deepMs.push(deep);
      }
    }
    paths.forEach((p, n) => {
      const f = median(p.firstMs), d = median(p.deepMs);
      const cells = [`${f.toFixed(2)} ms`, `${d.toFixed(2)} ms`, `${(d / f).toFixed(2)}x`].map((c) => c.padStart(10));
      console.log(`${(n === 0 ? sort : '').padEnd(11)} ${p.name.padEnd(14)} ${cells.join(' ')}`);
    });
    console.log(`${''.padEnd(11)} deepest page: ${pageNote}; HTTP, keyset and OFFSET ${same ? 'return the same tasks' : 'DIFFER'}`);
  }
  server.close();
} finally {
  await db.close();
  await rm(dataDir, { recursive: true, force: true });
}
