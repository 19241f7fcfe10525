// Rows of statements the builder cannot type (server/db/checked-rows.ts) come back as the schema
// says, or not at all.
import pg from 'pg';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkedRows } from '../server/db/checked-rows.js';
import { postgresUrl } from './support/databases.js';

describe('checkedRows', () => {
  let client: pg.Client;
  beforeAll(async () => {
    client = new pg.Client({ connectionString: postgresUrl() });
    await client.connect();
  });
  afterAll(() => client.end());

  it('answers the rows as the schema parses them', async () => {
    const rows = await checkedRows(
      client,
      z.object({ n: z.string(), even: z.boolean() }),
      'SELECT n::text AS n, n % 2 = 0 AS even FROM generate_series(1, $1::int) AS n',
      [2],
    );
    expect(rows).toEqual([
      { n: '1', even: false },
      { n: '2', even: true },
    ]);
  });

  it('refuses a row of another shape, naming the statement, the row and the field', async () => {
    const read = checkedRows(
      client,
      z.object({ n: z.string() }),
      `SELECT 'a' AS n
       UNION ALL SELECT NULL`,
    );
    await expect(read).rejects.toThrow(
      "Unexpected rows from `SELECT 'a' AS n UNION ALL SELECT NULL`: row 1 n: Expected string, received null",
    );
  });
});
