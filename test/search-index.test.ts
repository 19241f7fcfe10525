// `q` is served by trigram indexes (found by an attack: a search was a scan of every task).
import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TaskListQuerySchema } from '../contract/tasks.js';
import { rawQuery, statementOf, type Statement } from '../server/db/query.js';
import { taskPageQuery } from '../server/tasks/list-query.js';
import { serviceForFile } from './support/app.js';
import { bulkLoad } from './support/databases.js';
import { userForFile } from './support/users.js';

// The planner takes the trigram indexes for `q` from about 4,000 such tasks on (PostgreSQL 18 and
// 15 alike); at 20,000 it estimates the scan of every task four times dearer. Below the crossover
// the index would not be the planner's choice for real; above it, a larger table only widens the
// gap (the scan grows with the table, the index's cost with the matches), at a second of loading
// per 5,000 tasks.
const TASKS = 20_000;

const service = serviceForFile();
const owner = userForFile(service);
beforeAll(async () => {
  const url = service.databaseUrl;
  if (!url) throw new Error('the search test needs its database URL');
  await bulkLoad(url, async (run) => {
    // Realistic volume: many tasks with text unlike the search term, a few that contain it.
    await run(`
    INSERT INTO users (id, email, name, role, password_hash, created_at, updated_at)
      SELECT gen_random_uuid(), 'seed-' || i || '@example.test', 'Seed ' || md5(i::text), 'user', 'x', now(), now()
      FROM generate_series(1, 5000) AS i;
    INSERT INTO tasks (id, owner_id, title, description, created_at, updated_at)
      SELECT gen_random_uuid(), '${owner.user.id}', 'Task ' || md5(i::text), md5((i * 7)::text) || ' ' || md5((i * 13)::text), now(), now()
      FROM generate_series(1, ${TASKS}) AS i;
    INSERT INTO tasks (id, owner_id, title, description, created_at, updated_at)
      SELECT gen_random_uuid(), '${owner.user.id}', 'Find the needle ' || i, '', now(), now() FROM generate_series(1, 5) AS i;
    INSERT INTO tags (id, owner_id, name, name_key, color, created_at)
      SELECT gen_random_uuid(), '${owner.user.id}', 'tag ' || md5(i::text), 'tag ' || md5(i::text), '#000000', now()
      FROM generate_series(1, 5000) AS i;`);
    // What autovacuum does after a bulk load: statistics, and GIN pending lists merged.
    for (const table of ['users', 'tasks', 'tags']) await run(`VACUUM ANALYZE ${table}`);
  });
}, 120_000);

/** The rows of a plain EXPLAIN: one line of the plan each. */
const ExplainLinesSchema = z.array(z.object({ 'QUERY PLAN': z.string() }));

async function plan({ text, values }: Statement): Promise<string> {
  const rows = ExplainLinesSchema.parse(await service.ctx.db.sql.rows(`EXPLAIN ${text}`, values));
  return rows.map((row) => row['QUERY PLAN']).join('\n');
}

describe('searches at volume', () => {
  it('finds tasks by a substring of the title or description through the trigram indexes', async () => {
    const query = TaskListQuerySchema.parse({ q: 'the needle' });
    const explained = await plan(statementOf(taskPageQuery({ kind: 'all' }, query, undefined, query.limit + 1)));
    expect(explained).toContain('tasks_title_trgm_idx');
    expect(explained).toContain('tasks_description_trgm_idx');
    expect(explained).not.toMatch(/Seq Scan on tasks/);

    const started = performance.now();
    const res = await service.http.get('/tasks?q=the%20needle').set('Authorization', owner.auth).expect(200);
    expect(res.body.items).toHaveLength(5);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('searches users by email or name, and tags by name, through their indexes', async () => {
    const users = await plan(
      statementOf(
        rawQuery(
          sql`SELECT id FROM users WHERE email ILIKE ${'%seed-4242@%'} OR name ILIKE ${'%seed-4242@%'} ORDER BY id LIMIT 21`,
        ),
      ),
    );
    expect(users).toContain('users_email_trgm_idx');
    expect(users).toContain('users_name_trgm_idx');
    const tags = await plan(
      statementOf(rawQuery(sql`SELECT id FROM tags WHERE name ILIKE ${'%a1b2c3d%'} ORDER BY id LIMIT 21`)),
    );
    expect(tags).toContain('tags_name_trgm_idx');
  });
});
