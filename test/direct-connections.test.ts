// On a pool that reaches PostgreSQL directly, plain SQL is prepared (parsed and planned once per
// connection) and the statement timeout is the session's, so a statement runs without a transaction
// around it; through a transaction-mode pooler neither (docs/operations.md, connection pooler).
// A login's statements cost the server a third less prepared.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { openPostgres, type Database } from '../server/db/database.js';
import { rawQuery } from '../server/db/query.js';
import { freshDatabase, throughPooler, TEST_STATEMENT_TIMEOUT_MS, type TestDatabase } from './support/databases.js';

const STATEMENT = 'SELECT $1::int + 1 AS next';
const PREPARED = rawQuery(sql<{ statement: string }>`SELECT statement FROM pg_prepared_statements`);

/** The statements prepared on the pool's one connection, after `STATEMENT` ran twice on it, alone and in a pipeline. */
async function preparedAfterUse(db: Database): Promise<string[]> {
  expect(await db.sql.rows(STATEMENT, [1])).toEqual([{ next: 2 }]);
  const { next } = await db.sql.pipeline({ next: rawQuery(sql<{ next: number }>`SELECT ${2}::int + 1 AS next`) });
  expect(next).toEqual([{ next: 3 }]);
  return (await db.sql.all(PREPARED)).map((row) => row.statement);
}

describe.skipIf(throughPooler())('a direct pool', () => {
  let database: TestDatabase;
  const opened: Database[] = [];
  const open = (directUrl: string | undefined) => {
    // One connection, so the statement that lists what is prepared runs where the others ran.
    const db = openPostgres(database.url, { poolSize: 1, statementTimeoutMs: TEST_STATEMENT_TIMEOUT_MS, directUrl });
    opened.push(db);
    return db;
  };
  beforeAll(async () => {
    database = await freshDatabase();
  });
  afterAll(async () => {
    await Promise.all(opened.map((db) => db.close()));
    await database.drop();
  });

  it('prepares statements (its direct URL is its own), once per text', async () => {
    const prepared = await preparedAfterUse(open(database.url));
    expect(prepared.filter((text) => text === STATEMENT)).toHaveLength(1);
  });

  it('prepares nothing when the pool may be a pooler (no direct URL, or another one)', async () => {
    const elsewhere = new URL(database.url);
    elsewhere.searchParams.set('application_name', 'elsewhere');
    for (const directUrl of [undefined, elsewhere.toString()]) {
      expect(await preparedAfterUse(open(directUrl))).not.toContain(STATEMENT);
    }
  });

  it('has the statement timeout in its sessions, outside any transaction', async () => {
    const db = openPostgres(database.url, { poolSize: 1, statementTimeoutMs: 250, directUrl: database.url });
    opened.push(db);
    // "client": a start-up parameter of the session, not a SET LOCAL of a transaction around the statement.
    expect(await db.sql.rows("SELECT setting, source FROM pg_settings WHERE name = 'statement_timeout'")).toEqual([
      { setting: '250', source: 'client' },
    ]);
    await expect(db.sql.rows('SELECT pg_sleep(2)')).rejects.toMatchObject({ code: '57014' });
    await expect(
      db.sql.pipeline({ one: { text: 'SELECT 1' }, sleep: { text: 'SELECT pg_sleep(2)' } }),
    ).rejects.toMatchObject({
      code: '57014',
    });
  });

  it('keeps its connection (and what is prepared there) when a statement fails in the server', async () => {
    const db = open(database.url);
    const backend = async () =>
      (await db.sql.first(rawQuery(sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`)))?.pid;
    const before = await backend();
    await expect(db.sql.rows('SELECT 1 / $1::int AS never', [0])).rejects.toMatchObject({ code: '22012' });
    await expect(db.sql.first(rawQuery(sql<{ never: number }>`SELECT 1 / 0 AS never`))).rejects.toMatchObject({
      code: '22012',
    });
    expect(await backend()).toBe(before);
  });

  it("gives a failed statement's error the stack of the code that awaited it", async () => {
    const db = open(database.url);
    async function readingTheImpossible() {
      return await db.sql.rows('SELECT 1 / $1::int AS never', [0]);
    }
    const failure = await readingTheImpossible().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ code: '22012' });
    expect(failure instanceof Error ? failure.stack : undefined).toMatch(/readingTheImpossible/);
  });
});

// The login throttle's transactions (server/security/throttle.ts): every login from one address locks
// that address's budget, and a commit that waits for the disk would hold it through one flush per login.
describe('a pipeline that need not be durable', () => {
  let database: TestDatabase;
  let db: Database;
  const setting = "SELECT current_setting('synchronous_commit') AS commit";
  const commitSetting = rawQuery(sql<{ commit: string }>`SELECT current_setting('synchronous_commit') AS commit`);
  beforeAll(async () => {
    database = await freshDatabase();
    db = openPostgres(database.url, {
      poolSize: 1,
      statementTimeoutMs: TEST_STATEMENT_TIMEOUT_MS,
      directUrl: throughPooler() ? undefined : database.url,
    });
  });
  afterAll(async () => {
    await db.close();
    await database.drop();
  });

  it('commits without waiting for the disk, and leaves the connection as it was', async () => {
    // The server's own setting: 'on' on an external server, 'off' on the test suite's embedded one.
    const server = await db.sql.rows(setting);
    expect(await db.sql.pipeline({ commitSetting }, { durable: false })).toEqual({
      commitSetting: [{ commit: 'off' }],
    });
    expect(await db.sql.pipeline({ commitSetting })).toEqual({ commitSetting: server });
    expect(await db.sql.rows(setting)).toEqual(server);
  });

  it('still commits what it wrote', async () => {
    await db.sql.exec('CREATE TABLE counted (n int)');
    await db.sql.pipeline({ insert: { text: 'INSERT INTO counted VALUES (1)' } }, { durable: false });
    expect(await db.sql.rows('SELECT n FROM counted')).toEqual([{ n: 1 }]);
  });
});
