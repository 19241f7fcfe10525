import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskListQuerySchema, TaskSortSchema, type TaskSort } from '../contract/tasks.js';
import type { Cursor } from '../server/http/pagination.js';
import { rawQuery, statementOf, tables } from '../server/db/query.js';
import { sortOf, taskPageQuery, type TaskSet } from '../server/tasks/list-query.js';
import { taskPageStatement } from '../server/tasks/store.js';
import { bulkLoad, freshDatabase, type TestDatabase } from './support/databases.js';
import { storedTask } from './support/rows.js';
import { planNodes, type PlanNode } from './support/plans.js';

// Plans as tests: at a realistic volume, every page of GET /tasks (each sort, a user and an admin,
// first and deep pages, with and without filters) must be index range scans that read about
// `limit` rows, so that a change that brings back a scan fails here and not in production.
const USERS = 10;
const TASKS = 60_000;
const LIMIT = 20;
const DEEP = 2_500; // rows before the deep page's cursor (page 126 of 20)
const PROJECTS = 40;

let database: TestDatabase;
let userIds: string[];
/** A project user 1 is a member of (every second one is theirs). */
let memberProject: string;
/** A task of user 1's with 300 subtasks. */
let parentTask: string;
/** A project (of user 2's, not user 1's) whose 500 tasks or so are all blocked. */
let blockedProject: string;

beforeAll(async () => {
  database = await freshDatabase();
  const db = database.db.sql;
  userIds = (
    await db.all(
      rawQuery(sql<{ id: string }>`INSERT INTO users (id, email, name, role, password_hash, created_at, updated_at)
       SELECT gen_random_uuid(), 'plan' || i || '@example.test', 'User ' || i, CASE WHEN i = 0 THEN 'admin' ELSE 'user' END::"Role",
              'unused', now(), now()
       FROM generate_series(0, ${USERS - 1}) i RETURNING id`),
    )
  ).map((row) => row.id);
  const projectIds = (
    await db.all(
      rawQuery(sql<{ id: string }>`INSERT INTO projects (id, name, description, version, created_at, updated_at)
       SELECT gen_random_uuid(), 'project ' || i, '', 1, now(), now() FROM generate_series(1, ${PROJECTS}) i RETURNING id`),
    )
  ).map((row) => row.id);
  // Tasks spread over owners, one in seven assigned to someone else, one in five without a due date.
  // A few blocked (one in fifty, in runs of ten); a parent of user 1's with 300 of their personal
  // tasks as subtasks. Every column is set as the rows are made, as an application writes them:
  // updates afterwards would leave the heap in an order no real table has, and the planner's
  // choices with it. A third of the tasks in one of PROJECTS projects (by hash); user 1 a member of
  // every other one, user 2 of the first, whose tasks are all blocked. The second, user 1's, holds a
  // quarter of them (about 5,000): a project as large as a team's, whose pages only its index serves.
  parentTask = randomUUID();
  await bulkLoad(database.url, async (run) => {
    await run(
      `INSERT INTO tasks (id, owner_id, title, created_at, updated_at) VALUES ($1, $2, 'parent', now(), now())`,
      [parentTask, userIds[1]],
    );
    await run(
      `INSERT INTO tasks (id, owner_id, assignee_id, title, description, status, priority, due_at, created_at, updated_at,
                         open_blockers, parent_id, project_id)
     SELECT gen_random_uuid(), u.ids[1 + i % $2], CASE WHEN i % 7 = 0 THEN u.ids[1 + (i + 1) % $2] END,
            md5(i::text), '', (ARRAY['todo','in_progress','done'])[1 + i % 3]::"TaskStatus",
            (ARRAY['low','medium','high','urgent'])[1 + i % 4]::"TaskPriority",
            CASE WHEN i % 5 = 0 THEN NULL ELSE now() + (i % 1000) * interval '1 hour' END,
            now() - i * interval '1 second', now() - (i % 5000) * interval '1 second',
            CASE WHEN pj.n = 1 THEN 1 WHEN (i / 10) % 50 = 5 THEN 1 + i % 2 ELSE 0 END,
            CASE WHEN i % $2 = 1 AND i <= 3000 THEN $4::uuid END, p.ids[pj.n]
     FROM generate_series(1, $1) i, (SELECT $3::uuid[] AS ids) u, (SELECT $5::uuid[] AS ids) p,
          LATERAL (SELECT CASE WHEN abs(hashtext(i::text)) % 3 = 0 AND NOT (i % $2 = 1 AND i <= 3000)
                               THEN CASE WHEN abs(hashtext('q' || i)) % 4 = 0 THEN 2
                                         ELSE 1 + abs(hashtext('p' || i)) % $6 END END AS n) pj`,
      [TASKS, USERS, userIds, parentTask, projectIds, PROJECTS],
    );
    await run(
      `INSERT INTO project_members (project_id, user_id, role, added_at)
       SELECT p.id, $2::uuid, 'viewer', now() FROM unnest($1::uuid[]) WITH ORDINALITY AS p(id, n) WHERE p.n % 2 = 0`,
      [projectIds, userIds[1]],
    );
    await run(`INSERT INTO project_members (project_id, user_id, role, added_at) VALUES ($1, $2, 'viewer', now())`, [
      projectIds[0],
      userIds[2],
    ]);
    // What autovacuum does after a bulk load: statistics and the visibility map.
    await run('VACUUM ANALYZE tasks');
    await run('VACUUM ANALYZE project_members');
  });
  memberProject = projectIds[1] ?? '';
  blockedProject = projectIds[0] ?? '';
}, 120_000);
afterAll(() => database.drop());

/** The cursor of the row `depth` rows into the list: what a client holds after paging that far. */
async function cursorAt(
  set: TaskSet,
  sort: TaskSort,
  depth: number,
  filters: Record<string, string> = {},
): Promise<Cursor> {
  const rows = await database.db.sql.all(
    taskPageQuery(set, TaskListQuerySchema.parse({ sort, ...filters }), undefined, depth),
  );
  const last = rows[rows.length - 1];
  if (rows.length !== depth || !last) throw new Error(`the list is ${rows.length} rows long, not the ${depth} needed`);
  const task = await storedTask(database.db.sql, last.id);
  const value = task[sortOf(sort).field];
  return { s: sort, v: value instanceof Date ? value.toISOString() : value, id: task.id };
}

const deepCursor = (set: TaskSet, sort: TaskSort) => cursorAt(set, sort, DEEP);

/**
 * The first page and the page 200 rows in, with `filters`: the page along an index named
 * `index…`, then its rows, each by its primary key; every scan reads about a page.
 */
async function expectPagesAlong(
  set: TaskSet,
  sort: TaskSort,
  filters: Record<string, string>,
  index: string,
): Promise<void> {
  for (const at of [undefined, await cursorAt(set, sort, 200, filters)]) {
    const nodes = await plan(set, sort, filters, at);
    const scans = nodes.filter((node) => node['Relation Name'] === 'tasks');
    for (const scan of scans) {
      expect(scan['Node Type']).toMatch(/^Index (Only )?Scan$/);
      expect(scan['Actual Rows'] + (scan['Rows Removed by Filter'] ?? 0)).toBeLessThanOrEqual(LIMIT + 1);
    }
    expect(scans.some((scan) => scan['Index Name']?.startsWith(index))).toBe(true);
  }
}

/** Every index on tasks a plan of this file used: the last test checks that none is kept for nothing. */
const usedIndexes = new Set<string>();

async function explain(text: string, values: unknown[] = []): Promise<PlanNode[]> {
  const rows = await database.db.sql.rows(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values);
  const nodes = planNodes(rows);
  for (const node of nodes) if (node['Index Name']) usedIndexes.add(node['Index Name']);
  return nodes;
}

async function plan(
  set: TaskSet,
  sort: TaskSort,
  filters: Record<string, string>,
  cursor: Cursor | undefined,
): Promise<PlanNode[]> {
  // The statement GET /tasks runs: the page's ids and their rows (each by its primary key).
  const query = statementOf(taskPageStatement(set, TaskListQuerySchema.parse({ sort, ...filters }), cursor, LIMIT + 1));
  return explain(query.text, query.values);
}

const sorts = TaskSortSchema.options;
const callers = [
  // A user sees their personal tasks and their projects' (20 projects here): a scan per project.
  ['a user', (): TaskSet => ({ kind: 'member', userId: userIds[1]! })],
  ['a user, their own (GET /users/{id}/tasks)', (): TaskSet => ({ kind: 'either', userId: userIds[1]! })],
  ['an admin', (): TaskSet => ({ kind: 'all' })],
] as const;
const filterSets = [
  ['no filter', {}],
  // A filter on another column than the sort key: the scan steps over what it excludes (a third).
  // (A filter on the sort key itself, such as priority under sort=priority, can make PostgreSQL
  // before 17 step over every excluded value at the start of the order: bounded by the data, not the depth.)
  ['a status filter', { status: 'todo,in_progress' }],
] as const;

describe.each(callers)('GET /tasks for %s', (_who, setOf) => {
  describe.each(filterSets)('with %s', (_what, filters) => {
    it.each(sorts)('sort=%s: first and deep pages are index range scans reading about limit rows', async (sort) => {
      const set = setOf();
      for (const cursor of [undefined, await deepCursor(set, sort)]) {
        const nodes = await plan(set, sort, filters, cursor);
        const scans = nodes.filter((node) => node['Relation Name'] === 'tasks');
        const page = cursor ? 'deep page' : 'first page';
        expect(scans.length, page).toBeGreaterThan(0);
        for (const scan of scans) expect(scan['Node Type'], page).toMatch(/^Index (Only )?Scan$/);
        // Each branch (each project of a member's) reads its page (limit + 1) plus what the filters
        // skip (about half here), however deep the page.
        for (const scan of scans) {
          const read = scan['Actual Rows'] + (scan['Rows Removed by Filter'] ?? 0);
          expect(read, page).toBeLessThanOrEqual(3 * (LIMIT + 1));
        }
      }
    });
  });
});

describe('GET /tasks?projectId=', () => {
  const sets = [
    ['a member', (): TaskSet => ({ kind: 'member', userId: userIds[1]! })],
    ['an admin', (): TaskSet => ({ kind: 'all' })],
  ] as const;
  describe.each(sets)('for %s', (_who, setOf) => {
    it.each(sorts)("sort=%s: the project's index, first and deep pages alike", async (sort) => {
      const filters = { projectId: memberProject };
      // The project holds about 5,000 tasks here: the deep page is 200 rows in.
      await expectPagesAlong(setOf(), sort, filters, 'tasks_project_id');
    });
  });
});

describe('GET /tasks?parentId=', () => {
  const sets = [
    ['a user', (): TaskSet => ({ kind: 'member', userId: userIds[1]! })],
    ['a user, their own (GET /users/{id}/tasks)', (): TaskSet => ({ kind: 'either', userId: userIds[1]! })],
    ['an admin', (): TaskSet => ({ kind: 'all' })],
  ] as const;
  describe.each(sets)('for %s', (_who, setOf) => {
    it.each(sorts)("sort=%s: the parent's index, first and deep pages alike", async (sort) => {
      const filters = { parentId: parentTask };
      // The parent has 300 subtasks: the deep page is 200 rows in.
      await expectPagesAlong(setOf(), sort, filters, 'tasks_parent_id_');
    });
  });
});

describe('GET /tasks?blocked=', () => {
  // `blocked` is a column the writes keep (open_blockers): no relation is read per task. Blocked
  // tasks are few (one in fifty here), so filtering the list's scans would step over fifty rows per
  // row shown: each branch reads a partial index of the blocked tasks instead, per sort key, about
  // a page however deep. Unblocked tasks are most of them: the list's own scans, filtered, read
  // about a page too.
  describe.each(callers)('for %s', (_who, setOf) => {
    it.each(sorts)("blocked=true, sort=%s: the blocked tasks' indexes, first and deep pages alike", async (sort) => {
      const set = setOf();
      for (const cursor of [undefined, await deepCursor(set, sort)]) {
        const page = cursor ? 'deep page' : 'first page';
        const nodes = await plan(set, sort, { blocked: 'true' }, cursor);
        expect(nodes.some((node) => node['Relation Name'] === 'task_relations')).toBe(false);
        const scans = nodes.filter((node) => node['Relation Name'] === 'tasks');
        // The page's ids along the blocked tasks' indexes, then their rows by primary key.
        const picking = scans.filter((scan) => scan['Index Name'] !== 'tasks_pkey');
        expect(picking.length, page).toBeGreaterThan(0);
        // A member's branch of their projects may read each project's few blocked tasks whole
        // along its partial index (a bitmap scan, its Actual Rows per project) and sort them.
        const indexReads = nodes.filter(
          (node) => node['Index Name']?.startsWith('tasks_') && node['Index Name'] !== 'tasks_pkey',
        );
        expect(indexReads.length, page).toBeGreaterThan(0);
        for (const read of indexReads) expect(read['Index Name'], page).toMatch(/^tasks_blocked_/);
        for (const scan of picking) {
          expect(scan['Node Type'], page).toMatch(/^(Index (Only )?Scan|Bitmap Heap Scan)$/);
          // A member's own branch steps over their project tasks (about a third, more in places),
          // which it shows per project: within 3 pages, where filtering the list's scans read 50.
          expect(scan['Actual Rows'] + (scan['Rows Removed by Filter'] ?? 0), page).toBeLessThanOrEqual(
            3 * (LIMIT + 1),
          );
        }
      }
    });

    it("blocked=false: the list's own index range scans, first and deep pages alike", async () => {
      const set = setOf();
      for (const cursor of [undefined, await deepCursor(set, '-createdAt')]) {
        const nodes = await plan(set, '-createdAt', { blocked: 'false' }, cursor);
        expect(nodes.some((node) => node['Relation Name'] === 'task_relations')).toBe(false);
        const scans = nodes.filter((node) => node['Relation Name'] === 'tasks');
        expect(scans.length).toBeGreaterThan(0);
        // A member's tasks assigned by others are few: the planner may read them all along the
        // assignee index (a bitmap scan) and sort them. Never a sequential scan.
        for (const scan of scans) {
          expect(scan['Node Type']).toMatch(/^(Index (Only )?Scan|Bitmap Heap Scan)$/);
          if (scan['Node Type'] === 'Bitmap Heap Scan') continue;
          expect(scan['Actual Rows'] + (scan['Rows Removed by Filter'] ?? 0)).toBeLessThanOrEqual(2 * (LIMIT + 1));
        }
      }
    });
  });
});

describe('GET /tasks?projectId=&blocked=true', () => {
  // A project whose tasks are mostly blocked: its blocked tasks are paged along the project's
  // partial index of them, a page read however deep.
  const sets = [
    ['a member', (): TaskSet => ({ kind: 'member', userId: userIds[2]! })],
    ['an admin', (): TaskSet => ({ kind: 'all' })],
  ] as const;
  describe.each(sets)('for %s', (_who, setOf) => {
    it.each(sorts)("sort=%s: the project's index of its blocked tasks, first and deep pages alike", async (sort) => {
      const filters = { projectId: blockedProject, blocked: 'true' };
      await expectPagesAlong(setOf(), sort, filters, 'tasks_blocked_project_id_');
    });
  });
});

describe('the indexes on tasks', () => {
  it('a task by id reads the primary key', async () => {
    const task = await database.db.sql.first(tables.selectFrom('tasks').select('id').limit(1));
    await explain('SELECT * FROM tasks WHERE id = $1', [task!.id]);
  });

  // Every index is written by every insert and by each update of its columns: one that no query
  // uses only slows the writes down. Runs last, after every plan above. The trigram
  // indexes serve `q`, proven in search-index.test.ts (their plan needs its data to be chosen).
  it('every index on tasks is used by a plan above', async () => {
    const indexes = await database.db.sql.all(
      rawQuery(
        sql<{ indexname: string }>`SELECT indexname FROM pg_indexes WHERE tablename = 'tasks' ORDER BY indexname`,
      ),
    );
    const searchIndexes = ['tasks_description_trgm_idx', 'tasks_title_trgm_idx'];
    const unused = indexes
      .map((index) => index.indexname)
      .filter((name) => !usedIndexes.has(name) && !searchIndexes.includes(name));
    expect(unused).toEqual([]);
  });
});
