// The one way the service writes a query: Kysely's builder over the tables generated from
// prisma/schema.prisma (server/generated/kysely, made by `prisma generate` at install), so a
// query that names a column the models do not have, or reads a row as what it is not, fails `tsc`.
// Kysely only builds and compiles here; the statements run through SqlDatabase (sql.ts): its pool,
// its pipelines, its statement timeout and its retries.
import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type Compilable,
  type RawBuilder,
} from 'kysely';
import type { DB } from '../generated/kysely/tables.js';

export type { DB };

export const tables = new Kysely<DB>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    // Never connects: a query that reached it would be a bug, and it answers no rows.
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

/** A statement as pg sends it: its text with $1, $2, … and their values. */
export interface Statement {
  text: string;
  values?: unknown[];
}

/** A built query, compiled to the statement pg sends. */
export function statementOf(built: Compilable<unknown>): Statement {
  const { sql, parameters } = built.compile();
  return { text: sql, values: [...parameters] };
}

/**
 * Raw SQL written with Kysely's `sql<Row>` tag, as a query the pipeline and sessions run: its
 * values become parameters, and its rows are the `Row` it names (for what the builder cannot say,
 * such as a write's verdict decided in SQL).
 */
export const rawQuery = <O>(raw: RawBuilder<O>): Compilable<O> => ({ compile: () => raw.compile(tables) });
