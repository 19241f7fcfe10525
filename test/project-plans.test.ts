import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProjectListQuerySchema } from '../contract/projects.js';
import { rawQuery, statementOf, tables } from '../server/db/query.js';
import type { Principal } from '../server/http/principal.js';
import { projectsListed } from '../server/projects/queries.js';
import { membersWithUsers } from '../server/projects/serialize.js';
import { bulkLoad, freshDatabase, type TestDatabase } from './support/databases.js';
import { planNodes, type PlanNode } from './support/plans.js';

// Plans as tests, as test/list-plans.test.ts does for tasks: a member's projects and a project's
// members are read along their indexes, page 100 costing what page 1 does, however many projects
// and memberships there are.
const USERS = 2_000;
const PROJECTS = 20_000;
const LIMIT = 20;
const DEEP = 2_000;

let database: TestDatabase;
let member: string;
let crowded: string;

beforeAll(async () => {
  database = await freshDatabase();
  const db = database.db.sql;
  const users = (
    await db.all(
      rawQuery(sql<{ id: string }>`INSERT INTO users (id, email, name, role, password_hash, created_at, updated_at)
       SELECT gen_random_uuid(), 'plan' || i || '@example.test', 'User ' || i, 'user', 'unused', now(), now()
       FROM generate_series(0, ${USERS - 1}) i RETURNING id`),
    )
  ).map((row) => row.id);
  member = users[0] ?? '';
  await bulkLoad(database.url, async (run) => {
    // Ids in creation order (UUIDv7-like: time first), each project with two or three members; user 0
    // belongs to every fifth project, and the first project has every other user.
    await run(
      `INSERT INTO projects (id, name, description, created_by, created_at, updated_at)
       SELECT (lpad(to_hex(i), 12, '0') || '7000800000000000' || lpad(to_hex(i % 65536), 4, '0'))::uuid,
              'Project ' || i, '', u.ids[1 + i % $2], now(), now()
       FROM generate_series(1, $1) i, (SELECT $3::uuid[] AS ids) u`,
      [PROJECTS, USERS, users],
    );
    const numbered = `(SELECT id, created_at, row_number() OVER (ORDER BY id) AS n FROM projects) p`;
    for (const [who, which] of [
      ['$1::uuid[]', `1 + ((p.n * 7 + 13) % ${USERS})`],
      ['$1::uuid[]', `1 + ((p.n * 7 + 26) % ${USERS})`],
      ['$1::uuid[]', `CASE WHEN p.n % 5 = 0 THEN 1 END`],
    ]) {
      await run(
        `INSERT INTO project_members (project_id, user_id, role, added_at)
         SELECT p.id, (${who})[${which}], 'editor', p.created_at FROM ${numbered}
         WHERE (${who})[${which}] IS NOT NULL
         ON CONFLICT DO NOTHING`,
        [users],
      );
    }
    await run(
      `INSERT INTO project_members (project_id, user_id, role, added_at)
       SELECT p.id, u.id, 'viewer', now() + u.n * interval '1 millisecond'
       FROM (SELECT id FROM projects ORDER BY id LIMIT 1) p,
            (SELECT id, row_number() OVER (ORDER BY id) AS n FROM users WHERE id <> $1) u
       ON CONFLICT DO NOTHING`,
      [member],
    );
    await run('ANALYZE projects; ANALYZE project_members; ANALYZE users');
  });
  crowded = (await db.first(tables.selectFrom('projects').select('id').orderBy('id').limit(1)))?.id ?? '';
}, 120_000);
afterAll(() => database.drop());

async function explain(built: Parameters<typeof statementOf>[0]): Promise<PlanNode[]> {
  const { text, values } = statementOf(built);
  const rows = await database.db.sql.rows(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values);
  return planNodes(rows);
}

/** Rows the scans of `table` read, those filtered out included. */
const rowsRead = (nodes: PlanNode[], table: string) =>
  nodes
    .filter((node) => node['Relation Name'] === table)
    .reduce(
      (sum, scan) => sum + (scan['Actual Rows'] + (scan['Rows Removed by Filter'] ?? 0)) * scan['Actual Loops'],
      0,
    );

/** No scan of a whole table of projects or memberships (users may be: the planner may hash a small table). */
const expectNoSeqScan = (nodes: PlanNode[], label: string) =>
  expect(
    nodes
      .filter((node) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] !== 'users')
      .map((node) => node['Relation Name']),
    label,
  ).toEqual([]);

const user = (userId: string): Principal => ({ userId, sessionId: userId, role: 'user' });

describe('GET /projects for a member', () => {
  it('picks the page along project_members (user_id, project_id), first and deep pages alike', async () => {
    const deep = await database.db.sql.first(
      tables
        .selectFrom('project_members')
        .select('project_id')
        .where('user_id', '=', member)
        .orderBy('project_id')
        .offset(DEEP / 5)
        .limit(1),
    );
    for (const after of [undefined, deep?.project_id]) {
      const label = after ? 'deep page' : 'first page';
      const nodes = await explain(projectsListed(user(member), ProjectListQuerySchema.parse({ limit: LIMIT }), after));
      expectNoSeqScan(nodes, label);
      expect(
        nodes.some((node) => node['Index Name'] === 'project_members_user_id_project_id_idx'),
        label,
      ).toBe(true);
      // The page, then per project the caller's role (one probe) and its members counted (a
      // project's members, at most PROJECT_MAX_MEMBERS): a few rows per project here, never the list.
      expect(rowsRead(nodes, 'project_members'), label).toBeLessThanOrEqual((LIMIT + 1) * 8);
      expect(rowsRead(nodes, 'projects'), label).toBeLessThanOrEqual((LIMIT + 1) * 2);
    }
  });
});

describe("a project's members", () => {
  it('pages along project_members (project_id, added_at, user_id) from a cursor', async () => {
    const deep = await database.db.sql.first(
      tables
        .selectFrom('project_members')
        .select(['added_at', 'user_id'])
        .where('project_id', '=', crowded)
        .orderBy('added_at')
        .orderBy('user_id')
        .offset(100)
        .limit(1),
    );
    const members = membersWithUsers().where('project_members.project_id', '=', crowded);
    const page = deep
      ? members.where((eb) =>
          eb(
            eb.refTuple('project_members.added_at', 'project_members.user_id'),
            '>',
            eb.tuple(deep.added_at, deep.user_id),
          ),
        )
      : members;
    const nodes = await explain(
      page
        .orderBy('project_members.added_at')
        .orderBy('project_members.user_id')
        .limit(LIMIT + 1),
    );
    expectNoSeqScan(nodes, 'members');
    expect(nodes.some((node) => node['Index Name'] === 'project_members_project_id_added_at_user_id_idx')).toBe(true);
    expect(rowsRead(nodes, 'project_members')).toBeLessThanOrEqual(LIMIT + 1);
  });
});
