import { sql, type Compilable } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProjectListQuerySchema } from '../contract/projects.js';
import { rawQuery, tables } from '../server/db/query.js';
import type { Principal } from '../server/http/principal.js';
import { projectsListed } from '../server/projects/queries.js';
import { membersWithUsers } from '../server/projects/serialize.js';
import { TagListQuerySchema } from '../contract/tags.js';
import { tagsListed } from '../server/tags/queries.js';
import { bulkLoad, freshDatabase, type TestDatabase } from './support/databases.js';
import { explainPlan, rowsRead, type PlanNode } from './support/plans.js';

// Plans as tests, as test/list-plans.test.ts does for tasks: a member's projects, a project's
// members and a member's tags are read along their indexes, page 100 costing what page 1 does,
// however many projects, memberships and tags there are.
const USERS = 2_000;
const PROJECTS = 20_000;
const LIMIT = 20;
const DEEP = 2_000;

let database: TestDatabase;
let member: string;
/** A user in a few projects (two or three memberships in 2,000 projects), beside `member` in 4,000. */
let typical: string;
let crowded: string;
const TAGS_PER_USER = 20;
const TAGS_PER_PROJECT = 5;

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
  typical = users[7] ?? '';
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
    // Tags: every user's personal ones, every project's own, created in id order over a day.
    await run(
      `INSERT INTO tags (id, owner_id, project_id, name, name_key, color, created_at)
       SELECT gen_random_uuid(), u.id, NULL, 'tag ' || k, 'tag ' || k, '#3366cc', now() - random() * interval '1 day'
       FROM users u CROSS JOIN generate_series(1, $1) k`,
      [TAGS_PER_USER],
    );
    await run(
      `INSERT INTO tags (id, owner_id, project_id, name, name_key, color, created_at)
       SELECT gen_random_uuid(), p.created_by, p.id, 'tag ' || k, 'tag ' || k, '#3366cc', now() - random() * interval '1 day'
       FROM projects p CROSS JOIN generate_series(1, $1) k`,
      [TAGS_PER_PROJECT],
    );
    await run('ANALYZE projects; ANALYZE project_members; ANALYZE users; ANALYZE tags');
  });
  crowded = (await db.first(tables.selectFrom('projects').select('id').orderBy('id').limit(1)))?.id ?? '';
}, 120_000);
afterAll(() => database.drop());

const explain = (built: Compilable<unknown>): Promise<PlanNode[]> => explainPlan(database.db.sql, built);

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

describe('GET /tags for a member', () => {
  it('merges their personal tags and one index range per project of theirs, first and deep pages alike', async () => {
    for (const [who, userId] of [
      ['a member of 4,000 projects', member],
      ['a member of a few projects', typical],
    ] as const) {
      const visible = await database.db.sql.all(tablesOfTags(userId).select('tags.id').orderBy('tags.id'));
      expect(visible.length, who).toBeGreaterThan(TAGS_PER_USER);
      const deep = visible[Math.floor(visible.length / 2)]?.id;
      for (const after of [undefined, deep]) {
        const label = `${who}, ${after ? 'deep page' : 'first page'}`;
        const query = TagListQuerySchema.parse({ limit: LIMIT });
        const page = await database.db.sql.all(tagsListed(user(userId), query, after));
        const from = after === undefined ? 0 : visible.findIndex((tag) => tag.id === after) + 1;
        expect(
          page.map((tag) => tag.id),
          label,
        ).toEqual(visible.slice(from, from + LIMIT + 1).map((tag) => tag.id));
        const nodes = await explain(tagsListed(user(userId), query, after));
        expectNoSeqScan(nodes, label);
        // A page of personal tags, and at most a page per project of theirs (their projects'
        // memberships read once): never the tags of every project filtered.
        const projects = (
          await database.db.sql.all(
            tables.selectFrom('project_members').select('project_id').where('user_id', '=', userId),
          )
        ).length;
        expect(rowsRead(nodes, 'tags'), label).toBeLessThanOrEqual(
          (LIMIT + 1) * (1 + Math.min(projects, LIMIT + 1)) + projects * 2,
        );
      }
    }
  });
});

/** The tags `userId` sees, as the rule of who sees a tag says (their own, their projects'). */
const tablesOfTags = (userId: string) =>
  tables
    .selectFrom('tags')
    .where((eb) =>
      eb.or([
        eb.and([eb('tags.project_id', 'is', null), eb('tags.owner_id', '=', userId)]),
        eb(
          'tags.project_id',
          'in',
          eb
            .selectFrom('project_members')
            .select('project_members.project_id')
            .where('project_members.user_id', '=', userId),
        ),
      ]),
    );
