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
  type CompiledQuery,
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

/** The most shapes a prepared query keeps built. */
const MAX_SHAPES = 500;

/** What stands for a value while a prepared query is built: a NUL, which no SQL text or real value holds. */
const PLACEHOLDER = '\u0000value:';

/**
 * A query that Kysely builds and compiles once per `shape`, then only binds to each call's values:
 * building and compiling a query tree on every call was a sixth of a small read's CPU (the session
 * check of every request, a task's read). `build` gets `value(key)`, a stand-in for the call's
 * value, and must pass it into the query as a value (a parameter) and never let it decide the
 * query's form: whatever decides the form is the `shape` (the caller's kind of visibility, or a
 * list's sort and filters), under whose key (`keyOf`) the compiled query is kept.
 */
export function preparedQuery<K extends string, O, S = '', V extends Partial<Record<K, unknown>> = Record<K, string>>(
  build: (value: (key: K) => string, shape: S) => Compilable<O>,
  /** The key a shape's statement is kept under: the shape itself when it is a string. */
  keyOf: (shape: S) => string = String,
): (values: Readonly<V>, shape: S) => Compilable<O> {
  const prepared = new Map<string, { compiled: CompiledQuery<O>; slots: (K | undefined)[] }>();
  const prepare = (shape: S) => {
    const keys = new Map<string, K>();
    const value = (key: K) => {
      keys.set(PLACEHOLDER + key, key);
      return PLACEHOLDER + key;
    };
    const compiled = build(value, shape).compile();
    const slots = compiled.parameters.map((parameter) =>
      typeof parameter === 'string' ? keys.get(parameter) : undefined,
    );
    // A value spliced into the text or changed on its way in would be kept as it was the first time.
    const misused =
      compiled.sql.includes(PLACEHOLDER) ||
      compiled.parameters.some((p, i) => slots[i] === undefined && typeof p === 'string' && p.includes(PLACEHOLDER));
    if (misused) throw new Error(`a prepared query must take its values as parameters, unchanged: ${compiled.sql}`);
    const entry = { compiled, slots };
    // Shapes a client chooses (a list's filters) are many: past this many, the rest are built per call.
    if (prepared.size < MAX_SHAPES) prepared.set(keyOf(shape), entry);
    return entry;
  };
  return (values, shape) => ({
    compile: () => {
      const { compiled, slots } = prepared.get(keyOf(shape)) ?? prepare(shape);
      return {
        ...compiled,
        parameters: compiled.parameters.map((parameter, i) => {
          const key = slots[i];
          if (key === undefined) return parameter;
          // A shape whose statement takes a value the call does not give is a bug, never a NULL.
          if (values[key] === undefined) throw new Error(`a prepared query was given no value for ${key}`);
          return values[key];
        }),
      };
    },
  });
}
