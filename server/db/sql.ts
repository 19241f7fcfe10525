import type pg from 'pg';
import { answerKeeper, type AnswerKeeper, type OpenTransaction } from './answer-keeper.js';
import { isTransactionConflict } from './errors.js';
import { beginBounded, toError } from './statement-timeout.js';

/** Plain SQL beside Prisma: migrations, health checks, and the hot reads that must not pay for ORM query compilation. */
export interface SqlSession {
  /** Runs one or more statements without parameters (simple query protocol). */
  exec(sql: string): Promise<void>;
  rows<T>(sql: string, params?: unknown[]): Promise<T[]>;
}

/** A pipelined statement's rows, typed as its SQL selects them (pg hands rows over untyped). */
export const rowsOf = <T>(rows: unknown[] | undefined): T[] => (rows ?? []) as T[];

/** One statement of a pipelined transaction, with its parameters. */
export interface Statement {
  text: string;
  values?: unknown[];
}

export interface SqlDatabase extends SqlSession {
  transaction<T>(work: (tx: SqlSession) => Promise<T>): Promise<T>;
  /**
   * Runs `statements` in one transaction sent at once (pg's pipeline mode): one round trip, and
   * no lock waits on the client between statements. Each statement decides in SQL what the one
   * before it found, since none can be chosen after seeing another's answer. Returns each
   * statement's rows; a failing statement aborts the rest (they answer 25P02) and throws its error.
   * Under an Idempotency-Key it does not commit: the answer keeper commits it with the answer.
   */
  pipeline(statements: Statement[]): Promise<unknown[][]>;
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
    pipeline: async (statements) => {
      const keeper = answerKeeper();
      await keeper?.beforeWrite();
      // A deadlock or serialization failure aborts one transaction of several; run again, it succeeds.
      for (let attempt = 1; ; attempt++) {
        try {
          return await (keeper ? pipelineKept(pool, begin, statements, keeper) : pipelineOnce(pool, begin, statements));
        } catch (error) {
          if (attempt >= CONFLICT_ATTEMPTS || !isTransactionConflict(error)) throw error;
        }
      }
    },
  };
}

const CONFLICT_ATTEMPTS = 5;

async function pipelineOnce(pool: pg.Pool, begin: string, statements: Statement[]): Promise<unknown[][]> {
      const client = await pool.connect();
      const sent = [client.query(begin), ...statements.map((statement) => client.query(statement.text, statement.values)), client.query('COMMIT')];
      const settled = await Promise.allSettled(sent);
      const failed = settled.find((step): step is PromiseRejectedResult => step.status === 'rejected');
      // A failed statement aborts the transaction and its COMMIT answers ROLLBACK; a failed BEGIN
      // or COMMIT means a lost connection, which the pool must not hand out again.
      const [opened, committed] = [settled[0], settled[settled.length - 1]];
      const broken = [opened, committed].find((step): step is PromiseRejectedResult => step?.status === 'rejected');
      client.release(broken ? toError(broken.reason) : undefined);
      if (failed) throw firstCause(settled.slice(1, -1), failed.reason);
      return settled.slice(1, -1).map((step) => (step.status === 'fulfilled' ? step.value.rows : []));
}

/**
 * The statements sent at once without their COMMIT: the open transaction goes to `keeper`, whose
 * commit sends the answer's statement and the COMMIT together (one more round trip).
 */
async function pipelineKept(pool: pg.Pool, begin: string, statements: Statement[], keeper: AnswerKeeper): Promise<unknown[][]> {
  const client = await pool.connect();
  const settled = await Promise.allSettled([client.query(begin), ...statements.map((statement) => client.query(statement.text, statement.values))]);
  const [opened] = settled;
  const failed = settled.find((step): step is PromiseRejectedResult => step.status === 'rejected');
  if (opened?.status === 'rejected') {
    client.release(toError(opened.reason));
    throw opened.reason;
  }
  const end = async (steps: Promise<unknown>[]) => {
    const ended = await Promise.allSettled(steps);
    const last = ended[ended.length - 1];
    client.release(last?.status === 'rejected' ? toError(last.reason) : undefined);
    const refused = ended.find((step): step is PromiseRejectedResult => step.status === 'rejected');
    if (refused) throw refused.reason;
  };
  const rollback = () => end([client.query('ROLLBACK')]);
  if (failed) {
    await rollback().catch(() => undefined);
    throw firstCause(settled.slice(1), failed.reason);
  }
  const open: OpenTransaction = {
    // A failed `last` aborts the transaction: the COMMIT then answers ROLLBACK, and `end` throws `last`'s error.
    commit: (last) => end([...(last ? [client.query(last.text, last.values)] : []), client.query('COMMIT')]),
    rollback,
  };
  await keeper.keep(open);
  return settled.slice(1).map((step) => (step.status === 'fulfilled' ? step.value.rows : []));
}

// After the statement that failed, the others fail for the aborted transaction (25P02): the first
// failure is the cause.
function firstCause(steps: PromiseSettledResult<pg.QueryResult>[], fallback: unknown): unknown {
  const first = steps.find((step): step is PromiseRejectedResult => step.status === 'rejected');
  return first ? first.reason : fallback;
}
