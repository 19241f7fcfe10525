import type pg from 'pg';
import { z } from 'zod';
import { checkedRows } from '../db/checked-rows.js';
import { RESTORE_MARKER_TABLE } from './restore-marker.js';

/** The migration history: not dumped as rows, a restore replays the migrations instead. */
export const MIGRATIONS_TABLE = '_migrations';
/** Kept by triggers from other tables' rows: not dumped, a restore counts it afresh (recount_user_holdings). */
const DERIVED_TABLES = ['user_holdings'];
/** Not the service's data: tables that say how far a restore got. */
const BOOKKEEPING_TABLES = [MIGRATIONS_TABLE, RESTORE_MARKER_TABLE];

export interface TableShape {
  name: string;
  /** Columns that take values (generated columns are computed again). */
  columns: string[];
}

export const quoteIdent = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/**
 * Every table of the service's schema (read from the catalog, so tables added by later versions
 * are included), parents before the tables whose foreign keys reference them.
 */
export async function serviceTables(client: pg.ClientBase): Promise<TableShape[]> {
  const tables = await checkedRows(
    client,
    z.object({
      name: z.string(),
      // array_agg answers null for a table without a column that takes values.
      columns: z
        .array(z.string())
        .nullable()
        .transform((columns) => columns ?? []),
    }),
    `SELECT c.relname AS name,
            array_agg(a.attname::text ORDER BY a.attnum) FILTER (WHERE a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '') AS columns
       FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
      WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND NOT c.relispartition AND c.relname <> ALL($1::text[])
      GROUP BY c.relname ORDER BY c.relname`,
    [[...BOOKKEEPING_TABLES, ...DERIVED_TABLES]],
  );
  const references = await checkedRows(
    client,
    z.object({ child: z.string(), parent: z.string() }),
    `SELECT c.relname AS child, p.relname AS parent
       FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class p ON p.oid = k.confrelid
      WHERE k.contype = 'f' AND k.connamespace = current_schema()::regnamespace AND k.conrelid <> k.confrelid`,
  );
  const parents = new Map<string, string[]>();
  for (const { child, parent } of references) parents.set(child, [...(parents.get(child) ?? []), parent]);
  const ordered: TableShape[] = [];
  const placed = new Set<string>();
  const byName = new Map(tables.map((t) => [t.name, { name: t.name, columns: t.columns }]));
  const place = (name: string, path: string[]) => {
    if (placed.has(name)) return;
    if (path.includes(name)) throw new Error(`Foreign keys form a cycle: ${[...path, name].join(' -> ')}`);
    for (const parent of parents.get(name) ?? []) place(parent, [...path, name]);
    const table = byName.get(name);
    if (table) ordered.push(table);
    placed.add(name);
  };
  for (const table of tables) place(table.name, []);
  return ordered;
}

export interface SequenceState {
  name: string;
  lastValue: string;
  isCalled: boolean;
}

/** Every sequence of the schema (serial and identity columns' too) and where it stands. */
export async function sequenceStates(client: pg.ClientBase): Promise<SequenceState[]> {
  const rows = await checkedRows(
    client,
    z.object({ name: z.string() }),
    `SELECT relname AS name FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relkind = 'S' ORDER BY relname`,
  );
  const states: SequenceState[] = [];
  for (const { name } of rows) {
    const state = await checkedRows(
      client,
      z.object({ last_value: z.string(), is_called: z.boolean() }),
      `SELECT last_value::text AS last_value, is_called FROM ${quoteIdent(name)}`,
    );
    if (state[0]) states.push({ name, lastValue: state[0].last_value, isCalled: state[0].is_called });
  }
  return states;
}

/** Tables of the schema that hold at least one row (the migration history aside). */
export async function tablesWithRows(client: pg.ClientBase): Promise<string[]> {
  const filled: string[] = [];
  for (const table of await serviceTables(client)) {
    const rows = await checkedRows(
      client,
      z.object({ any: z.boolean() }),
      `SELECT EXISTS (SELECT 1 FROM ${quoteIdent(table.name)}) AS any`,
    );
    if (rows[0]?.any) filled.push(table.name);
  }
  return filled;
}
