import { sql, type Compilable } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawQuery } from '../server/db/query.js';
import { logPageQuery, START, type Position, type Reader } from '../server/events/log.js';
import { bulkLoad, freshDatabase, type TestDatabase } from './support/databases.js';
import { explainPlan, rowsRead, type PlanNode } from './support/plans.js';

// Plans as tests, as test/list-plans.test.ts does for tasks: a member's page of the event log (the
// changes feed, and a live stream catching up) reads the events naming them (the audience index)
// and one range of (project_id, txid, seq) per project of theirs, never the log from the cursor on
// filtering out everyone else's events.
const USERS = 500;
const PROJECTS = 400;
const MEMBER_OF = 40; // projects of the member (every tenth)
const EVENTS = 300_000;
const LIMIT = 100;

let database: TestDatabase;
let member: string;
/** Events naming the member (their personal tasks' and account's). */
let named: number;
/** A position half-way through the log: a reader that has kept up with half of it. */
let middle: Position;

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
    await run(
      `INSERT INTO projects (id, name, description, created_at, updated_at)
       SELECT gen_random_uuid(), 'Project ' || i, '', now(), now() FROM generate_series(1, $1) i`,
      [PROJECTS],
    );
    await run(
      `INSERT INTO project_members (project_id, user_id, role, added_at)
       SELECT p.id, $1::uuid, 'viewer', now()
       FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM projects) p WHERE p.n % 10 = 0`,
      [member],
    );
    // Every other user in about 20 projects.
    await run(
      `INSERT INTO project_members (project_id, user_id, role, added_at)
       SELECT p.id, ($1::uuid[])[2 + (p.n * 7 + k * 31) % ($2 - 1)], 'editor', now()
       FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM projects) p CROSS JOIN generate_series(1, 25) k
       ON CONFLICT DO NOTHING`,
      [users, USERS],
    );
    // Half the events are of a project's task (one of PROJECTS at random), half of someone's
    // personal task; one in 1,000 of those names the member. Positions spread over the transaction
    // ids already past, so every event is below the readers' horizon.
    await run(
      `INSERT INTO events (id, txid, type, occurred_at, actor_id, data, audience, project_id)
       SELECT gen_random_uuid(), 1 + (i::bigint * (x.now - 2)) / $1, 'task.deleted', now(), NULL,
              jsonb_build_object('taskId', gen_random_uuid()),
              CASE WHEN i % 2 = 0 THEN ARRAY[]::uuid[]
                   WHEN i % 1000 = 1 THEN ARRAY[$2::uuid]
                   ELSE ARRAY[($3::uuid[])[2 + i % ($4 - 1)]] END,
              CASE WHEN i % 2 = 0 THEN (p.ids)[1 + (i / 2) % $5] END
       FROM generate_series(1, $1) i,
            (SELECT (pg_current_xact_id()::text)::bigint AS now) x,
            (SELECT array_agg(id ORDER BY id) AS ids FROM projects) p`,
      [EVENTS, member, users, USERS, PROJECTS],
    );
    await run('ANALYZE events; ANALYZE project_members; ANALYZE projects');
  });
  const counted = await db.first(
    rawQuery(
      sql<{ named: number }>`SELECT count(*)::int AS named FROM events WHERE audience @> ARRAY[${member}::uuid]`,
    ),
  );
  named = counted?.named ?? 0;
  const half = await db.first(
    rawQuery(
      sql<{ txid: string; seq: string }>`SELECT txid, seq FROM events ORDER BY txid, seq OFFSET ${EVENTS / 2} LIMIT 1`,
    ),
  );
  middle = { txid: BigInt(half?.txid ?? 0), seq: BigInt(half?.seq ?? 0) };
}, 180_000);
afterAll(() => database.drop());

const explain = (built: Compilable<unknown>): Promise<PlanNode[]> => explainPlan(database.db.sql, built);

const readers: { label: string; reader: () => Reader }[] = [
  { label: 'a member', reader: () => ({ userId: member, admin: false }) },
  // A personal access token with events:read and tasks:read: the event types filtered in the same scans.
  {
    label: "a member's token",
    reader: () => ({ userId: member, admin: false, scopes: ['events:read', 'tasks:read'] }),
  },
];

describe("a member's page of the event log (/changes, a live stream's catch-up)", () => {
  it('holds events of the member and of their projects, as the filter over the log gives them', async () => {
    const db = database.db.sql;
    const page = await db.all(logPageQuery(START, LIMIT, { userId: member, admin: false }));
    const expected = await db.all(
      rawQuery(sql<{ id: string }>`SELECT e.id FROM events e
        WHERE e.audience @> ARRAY[${member}::uuid]
           OR e.project_id IN (SELECT project_id FROM project_members WHERE user_id = ${member}::uuid)
        ORDER BY e.txid, e.seq LIMIT ${LIMIT}`),
    );
    expect(page.map((row) => row.id)).toEqual(expected.map((row) => row.id));
  });

  for (const { label, reader } of readers) {
    it(`reads the audience index and (project_id, txid, seq), from the start and from the middle (${label})`, async () => {
      expect(named).toBeGreaterThan(50);
      for (const [at, after] of [
        ['from the start', START],
        ['from the middle', middle],
      ] as const) {
        const nodes = await explain(logPageQuery(after, LIMIT, reader()));
        const where = `${label}, ${at}`;
        expect(
          nodes
            .filter((node) => node['Node Type'] === 'Seq Scan' && node['Relation Name'] === 'events')
            .map((node) => node['Relation Name']),
          where,
        ).toEqual([]);
        expect(
          nodes.some((node) => node['Index Name'] === 'events_project_id_txid_seq_idx'),
          where,
        ).toBe(true);
        expect(
          nodes.some((node) => node['Index Name'] === 'events_audience_idx'),
          where,
        ).toBe(true);
        // The events naming the member (all of them: a GIN index has no order), then at most a
        // page per project of theirs: never the 300,000 events of the log.
        expect(rowsRead(nodes, 'events'), where).toBeLessThanOrEqual(named + MEMBER_OF * (LIMIT + 1));
      }
    });
  }
});
