import type pg from 'pg';
import { beginBounded } from './statement-timeout.js';

/** Plain SQL beside Prisma: migrations, health checks, and the hot reads that must not pay for ORM query compilation. */
export interface SqlSession {
  /** Runs one or more statements without parameters (simple query protocol). */
  exec(sql: string): Promise<void>;
  rows<T>(sql: string, params?: unknown[]): Promise<T[]>;
}

export interface SqlDatabase extends SqlSession {
  transaction<T>(work: (tx: SqlSession) => Promise<T>): Promise<T>;
}

function pgSession(client: pg.Pool | pg.PoolClient): SqlSession {
  return {
    exec: async (sql) => {
      await client.query(sql);
    },
    rows: async <T>(sql: string, params: unknown[] = []) =>
      (await client.query(sql, params)).rows as T[],
  };
}

/** Plain SQL on `pool`; every transaction bounded by `statementTimeoutMs` when given (see statement-timeout.ts). */
export function pgSql(pool: pg.Pool, statementTimeoutMs?: number): SqlDatabase {
  const begin = beginBounded(statementTimeoutMs);
  return {
    ...pgSession(pool),
    transaction: async (work) => {
      const client = await pool.connect();
      try {
        await client.query(begin);
        const result = await work(pgSession(client));
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
    },
  };
}
