import { sql, type Compilable } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activityPage } from '../server/activity/service.js';
import { commentPage } from '../server/comments/service.js';
import { rawQuery, tables } from '../server/db/query.js';
import { bulkLoad, freshDatabase, type TestDatabase } from './support/databases.js';
import { explainPlan, rowsRead, type PlanNode } from './support/plans.js';

// Plans as tests, as test/list-plans.test.ts does for tasks: a task with TASK_MAX_COMMENTS comments
// (and twice as many entries of activity) pages its comments and its activity along their indexes,
// the deep page reading what the first does, among many other tasks' comments and activity.
const COMMENTS = 10_000;
const OTHER_TASKS = 200;
const LIMIT = 20;
const DEEP = 9_000;

let database: TestDatabase;
let busy: string;

beforeAll(async () => {
  database = await freshDatabase();
  const [owner] = await database.db.sql.all(
    rawQuery(sql<{ id: string }>`INSERT INTO users (id, email, name, role, password_hash, created_at, updated_at)
     VALUES (gen_random_uuid(), 'plans@example.test', 'Plans', 'user', 'unused', now(), now()) RETURNING id`),
  );
  await bulkLoad(database.url, async (run) => {
    // Ids in creation order (UUIDv7-like: time first), as the service makes them.
    const uuidv7Like = (n: string) =>
      `(lpad(to_hex(${n}), 12, '0') || '7000800000000000' || lpad(to_hex(${n} % 65536), 4, '0'))::uuid`;
    await run(
      `INSERT INTO tasks (id, owner_id, title, created_at, updated_at, comment_count)
       SELECT ${uuidv7Like('i')}, $1::uuid, 'task ' || i, now(), now(), CASE WHEN i = 1 THEN $2 ELSE 50 END
       FROM generate_series(1, $3) i`,
      [owner?.id, COMMENTS, OTHER_TASKS + 1],
    );
    // The busy task has COMMENTS comments, every other task 50; activity twice that, at distinct instants.
    const tasks = `(SELECT id, row_number() OVER (ORDER BY id) AS t FROM tasks) t`;
    await run(
      `INSERT INTO comments (id, task_id, author_id, body, created_at, updated_at)
       SELECT ${uuidv7Like('(t.t * 100000 + i)')}, t.id, $1::uuid, 'comment ' || i, now(), now()
       FROM ${tasks}, generate_series(1, $2) i WHERE i <= CASE WHEN t.t = 1 THEN $2 ELSE 50 END`,
      [owner?.id, COMMENTS],
    );
    await run(
      `INSERT INTO task_activity (task_id, at, id, actor_id, type, changes)
       SELECT t.id, now() - i * interval '1 second', gen_random_uuid(), $1::uuid, 'comment.created', '[]'::jsonb
       FROM ${tasks}, generate_series(1, $2) i WHERE i <= CASE WHEN t.t = 1 THEN $2 ELSE 100 END`,
      [owner?.id, COMMENTS * 2],
    );
    await run('ANALYZE tasks; ANALYZE comments; ANALYZE task_activity');
  });
  busy = (await database.db.sql.first(tables.selectFrom('tasks').select('id').orderBy('id').limit(1)))?.id ?? '';
}, 120_000);
afterAll(() => database.drop());

const explain = (built: Compilable<unknown>): Promise<PlanNode[]> => explainPlan(database.db.sql, built);

const seqScans = (nodes: PlanNode[]) =>
  nodes.filter((node) => node['Node Type'] === 'Seq Scan').map((node) => node['Relation Name']);

describe('a task with 10,000 comments', () => {
  it('pages its comments along comments (task_id, id), first and deep pages alike', async () => {
    const deep = await database.db.sql.first(
      tables.selectFrom('comments').select('id').where('task_id', '=', busy).orderBy('id').offset(DEEP).limit(1),
    );
    expect(deep).toBeDefined();
    for (const after of [undefined, deep?.id]) {
      const label = after ? 'deep page' : 'first page';
      const nodes = await explain(commentPage(busy, LIMIT, after));
      expect(seqScans(nodes), label).toEqual([]);
      expect(
        nodes.some((node) => node['Index Name'] === 'comments_task_id_id_idx'),
        label,
      ).toBe(true);
      expect(rowsRead(nodes, 'comments'), label).toBeLessThanOrEqual(LIMIT + 1);
    }
  });

  it('pages its activity newest first along task_activity (task_id, at, id) backwards, first and deep pages alike', async () => {
    const deep = await database.db.sql.first(
      tables
        .selectFrom('task_activity')
        .select(['at', 'id'])
        .where('task_id', '=', busy)
        .orderBy('at', 'desc')
        .orderBy('id', 'desc')
        .offset(DEEP * 2)
        .limit(1),
    );
    expect(deep).toBeDefined();
    for (const after of [undefined, deep && { at: deep.at.toISOString(), id: deep.id }]) {
      const label = after ? 'deep page' : 'first page';
      const nodes = await explain(activityPage(busy, LIMIT, after));
      expect(seqScans(nodes), label).toEqual([]);
      const scan = nodes.find((node) => node['Index Name'] === 'task_activity_pkey');
      expect(scan?.['Scan Direction'], label).toBe('Backward');
      expect(rowsRead(nodes, 'task_activity'), label).toBeLessThanOrEqual(LIMIT + 1);
    }
  });
});
