import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, MigrationError, pendingMigrations, readMigrations } from '../server/db/migrate.js';
import { emptyDatabase, freshDatabase, type TestDatabase } from './support/databases.js';
import { schemaSnapshot } from './support/catalog.js';

const run = promisify(execFile);

/** The SQL that creates exactly what prisma/schema.prisma describes, from Prisma's own differ. */
async function sqlFromSchema(databaseUrl: string): Promise<string> {
  // Prisma's CLI itself, not through npx, which adds npm's own start-up (0.4 s of CPU).
  const { stdout } = await run(
    process.execPath,
    [
      path.resolve(import.meta.dirname, '..', 'node_modules', 'prisma', 'build', 'index.js'),
      'migrate',
      'diff',
      '--from-empty',
      '--to-schema-datamodel',
      'prisma/schema.prisma',
      '--script',
    ],
    // The CLI's WASM engine wants a database to talk to (prisma.config.ts), though it changes nothing.
    {
      cwd: path.resolve(import.meta.dirname, '..'),
      maxBuffer: 10 * 1024 * 1024,
      // CHECKPOINT_DISABLE: Prisma's CLI never calls its update-check host.
      env: { ...process.env, PRISMA_DIFF_DATABASE_URL: databaseUrl, CHECKPOINT_DISABLE: '1' },
    },
  );
  return stdout;
}

const HAND_WRITTEN_INDEXES = [
  'tasks_due_key_id_idx',
  'tasks_owner_id_due_key_id_idx',
  'tasks_assignee_id_due_key_id_idx',
  'tasks_project_id_due_key_id_idx',
  'tasks_parent_id_created_at_id_idx',
  'tasks_parent_id_updated_at_id_idx',
  'tasks_parent_id_priority_id_idx',
  'tasks_parent_id_title_id_idx',
  'tasks_parent_id_due_key_id_idx',
  'tags_owner_id_name_key_key',
  // The blocked tasks' partial indexes, per list branch and sort key.
  'tasks_blocked_created_at_id_idx',
  'tasks_blocked_updated_at_id_idx',
  'tasks_blocked_priority_id_idx',
  'tasks_blocked_title_id_idx',
  'tasks_blocked_due_key_id_idx',
  'tasks_blocked_owner_id_created_at_id_idx',
  'tasks_blocked_owner_id_updated_at_id_idx',
  'tasks_blocked_owner_id_priority_id_idx',
  'tasks_blocked_owner_id_title_id_idx',
  'tasks_blocked_owner_id_due_key_id_idx',
  'tasks_blocked_assignee_id_created_at_id_idx',
  'tasks_blocked_assignee_id_updated_at_id_idx',
  'tasks_blocked_assignee_id_priority_id_idx',
  'tasks_blocked_assignee_id_title_id_idx',
  'tasks_blocked_assignee_id_due_key_id_idx',
  'tasks_blocked_project_id_created_at_id_idx',
  'tasks_blocked_project_id_updated_at_id_idx',
  'tasks_blocked_project_id_priority_id_idx',
  'tasks_blocked_project_id_title_id_idx',
  'tasks_blocked_project_id_due_key_id_idx',
];

describe('migration history', () => {
  let migrated: TestDatabase;
  beforeAll(async () => {
    migrated = await freshDatabase();
  });
  afterAll(() => migrated.drop());

  it('produces exactly the schema that prisma/schema.prisma describes', async () => {
    // Both sides on the same kind of server, so the catalogs compare like for like.
    const fromSchema = await emptyDatabase();
    try {
      await fromSchema.sql.exec(await sqlFromSchema(fromSchema.url));
      const expected = await schemaSnapshot(fromSchema.sql);
      const actual = await schemaSnapshot(migrated.db.sql);
      // Indexes the schema language cannot state live in the migrations only, each named here.
      const handWritten = actual.indexes.filter((index) =>
        HAND_WRITTEN_INDEXES.some((name) => index.includes(` ${name} `)),
      );
      expect(handWritten).toHaveLength(HAND_WRITTEN_INDEXES.length);
      expect({ ...actual, indexes: actual.indexes.filter((index) => !handWritten.includes(index)) }).toEqual(expected);
      expect(actual.columns.length).toBeGreaterThan(40);
    } finally {
      await fromSchema.drop();
    }
  }, 120_000);

  it('has nothing pending on a migrated database', async () => {
    expect(await pendingMigrations(migrated.db.sql, await readMigrations())).toEqual([]);
  });

  it('applies nothing twice', async () => {
    expect(await migrate(migrated.db.sql)).toEqual([]);
  });
});

describe('the migrator', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'migrations-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  async function writeMigration(name: string, sql: string) {
    await mkdir(path.join(dir, name), { recursive: true });
    await writeFile(path.join(dir, name, 'migration.sql'), sql);
  }

  it('rolls back every pending migration when one fails', async () => {
    await writeMigration('001_a', 'CREATE TABLE a (id int);');
    await writeMigration('002_b', 'CREATE TABLE b (id int); SELECT no_such_function();');
    const { sql, drop } = await emptyDatabase();
    await expect(migrate(sql, await readMigrations(dir))).rejects.toThrow();
    expect(await sql.rows(`SELECT to_regclass('a')::text AS t`)).toEqual([{ t: null }]);
    await drop();
    await rm(path.join(dir, '002_b'), { recursive: true });
  });

  it('refuses a database whose applied migration was edited afterwards', async () => {
    const { sql, drop } = await emptyDatabase();
    expect(await migrate(sql, await readMigrations(dir))).toEqual(['001_a']);
    await writeMigration('001_a', 'CREATE TABLE a (id bigint);');
    await expect(migrate(sql, await readMigrations(dir))).rejects.toThrow(MigrationError);
    await drop();
  });
});
