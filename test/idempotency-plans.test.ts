import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql, type Compilable } from 'kysely';
import { rawQuery, statementOf } from '../server/db/query.js';
import { expiredKeys, keysBeyondCap } from '../server/http/idempotency.js';
import { bulkLoad, freshDatabase, type TestDatabase } from './support/databases.js';
import { planNodes, type PlanNode } from './support/plans.js';

// Plans as tests for the idempotency keys' housekeeping, at a realistic volume (100,000 keys over
// 1,000 callers, one of them past the cap): every new key trims its caller to
// IDEMPOTENCY_MAX_KEYS_PER_USER, and housekeeping purges expired answers. Both must stay index scans
// that read what they delete (and, for the trim, the caller's newest keys), never the table.
const CALLERS = 1_000;
const KEYS_EACH = 90;
const CAP = 10_000;
const TRIM_INDEX = 'idempotency_keys_user_id_created_at_key_idx';
const EXPIRY_INDEX = 'idempotency_keys_expires_at_idx';

/** What a plan reads on `index`: every node scanning it, bitmap or not. */
const scansOn = (nodes: PlanNode[], index: string) => nodes.filter((node) => node['Index Name'] === index);

let database: TestDatabase;
let capped: string;
let light: string;

beforeAll(async () => {
  database = await freshDatabase();
  const db = database.db.sql;
  const ids = (
    await db.all(
      rawQuery(sql<{ id: string }>`INSERT INTO users (id, email, name, role, password_hash, created_at, updated_at)
       SELECT gen_random_uuid(), 'keys' || i || '@example.test', 'Caller ' || i, 'user'::"Role", 'unused', now(), now()
       FROM generate_series(1, ${CALLERS}) i RETURNING id`),
    )
  ).map((row) => row.id);
  [capped = '', light = ''] = ids;
  // Made over the last 25 hours (a twenty-fifth has expired), kept 24 hours; the first caller holds
  // one key past the cap, as just after claiming a new one.
  await bulkLoad(database.url, async (run) => {
    await run(
      `INSERT INTO idempotency_keys (user_id, key, fingerprint, status, response, created_at, expires_at)
     SELECT u.id, gen_random_uuid()::text, md5(g::text), 201, '{"headers":{},"body":"{}"}'::jsonb, t.at, t.at + interval '24 hours'
     FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n),
          LATERAL generate_series(1, CASE WHEN u.n = 1 THEN $2 + 1 ELSE $3 END) g,
          LATERAL (SELECT now() - ((g * 7919 + u.n * 104729) % 90000000) * interval '1 millisecond' AS at) t`,
      [ids, CAP, KEYS_EACH],
    );
    // What autovacuum does after a bulk load (statistics, the visibility map).
    await run('VACUUM ANALYZE idempotency_keys');
  });
}, 120_000);
afterAll(() => database.drop());

const ROLLBACK = new Error('rolled back');

/** The plan of `statement` as it ran (EXPLAIN ANALYZE), with what it deleted rolled back. */
async function planOf(built: Compilable<unknown>): Promise<PlanNode[]> {
  const statement = statementOf(built);
  let nodes: PlanNode[] = [];
  await database.db.sql
    .transaction(async (tx) => {
      const rows = await tx.rows(`EXPLAIN (ANALYZE, FORMAT JSON) ${statement.text}`, statement.values);
      nodes = planNodes(rows);
      throw ROLLBACK;
    })
    .catch((error: unknown) => {
      if (error !== ROLLBACK) throw error;
    });
  return nodes;
}

describe('idempotency keys at volume', () => {
  it('trims a caller past the cap on the (user_id, created_at, key) index: the newest read backwards without a sort, the rest deleted as a range', async () => {
    const nodes = await planOf(keysBeyondCap(capped, CAP));
    expect(nodes.map((node) => node['Node Type'])).not.toContain('Seq Scan');
    // The range below the cut on the index: exactly the one key past the cap, read and deleted. (How
    // the newest are read, backwards on it or through the primary key and a sort, is the planner's
    // choice from its statistics: seen both ways on PostgreSQL 18 after the same VACUUM ANALYZE.)
    const scans = scansOn(nodes, TRIM_INDEX);
    expect(scans.length).toBeGreaterThan(0);
    expect(scans[scans.length - 1]).toMatchObject({
      'Node Type': expect.stringMatching(/^(Bitmap )?Index (Only )?Scan$/),
      'Actual Rows': 1,
    });
  });

  it("reads only the caller's own keys when under the cap, and deletes none", async () => {
    const nodes = await planOf(keysBeyondCap(light, CAP));
    expect(nodes.map((node) => node['Node Type'])).not.toContain('Seq Scan');
    expect(scansOn(nodes, TRIM_INDEX).length).toBeGreaterThan(0);
  });

  it('purges expired answers on the expires_at index, reading only those', async () => {
    const expired = await database.db.sql.first(
      rawQuery(sql<{ count: number }>`SELECT count(*)::int AS count FROM idempotency_keys WHERE expires_at < now()`),
    );
    expect(expired?.count).toBeGreaterThan(0);
    const nodes = await planOf(expiredKeys(new Date()));
    expect(nodes.map((node) => node['Node Type'])).not.toContain('Seq Scan');
    const [scan] = scansOn(nodes, EXPIRY_INDEX);
    expect(scan?.['Actual Rows']).toBeGreaterThanOrEqual(expired?.count ?? 0);
    expect(scan?.['Actual Rows']).toBeLessThan((expired?.count ?? 0) * 1.1);
  });
});
