import { sql } from 'kysely';
import { rawQuery } from '../../server/db/query.js';
import type { SqlSession } from '../../server/db/sql.js';

/**
 * A comparable description of the public schema: enums, columns, constraints and indexes, with
 * the migrator's own bookkeeping table left out. Two databases with equal snapshots have the same
 * schema for every purpose the service cares about.
 */
export interface SchemaSnapshot {
  enums: string[];
  columns: string[];
  constraints: string[];
  indexes: string[];
}

export async function schemaSnapshot(db: SqlSession): Promise<SchemaSnapshot> {
  // Each statement below names its one column `line`.
  const lines = async (text: string) => (await db.all(rawQuery(sql.raw<{ line: string }>(text)))).map((r) => r.line);
  return {
    enums: await lines(`
      SELECT t.typname || ': ' || string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) AS line
      FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid JOIN pg_namespace n ON n.oid = t.typnamespace
      WHERE n.nspname = 'public' GROUP BY t.typname ORDER BY 1`),
    columns: await lines(`
      SELECT table_name || '.' || column_name || ' ' || data_type || '/' || udt_name
        || coalesce('(' || datetime_precision || ')', '') || ' ' || is_nullable || ' ' || coalesce(column_default, '-') AS line
      FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name <> '_migrations' ORDER BY 1`),
    constraints: await lines(`
      SELECT c.conrelid::regclass::text || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid) AS line
      FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
      WHERE n.nspname = 'public' AND c.conrelid::regclass::text <> '"_migrations"' AND c.conrelid::regclass::text <> '_migrations'
      ORDER BY 1`),
    indexes: await lines(`
      SELECT indexdef AS line FROM pg_indexes
      WHERE schemaname = 'public' AND tablename <> '_migrations' ORDER BY 1`),
  };
}
