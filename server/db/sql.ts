import type { Compilable } from 'kysely';
import pg from 'pg';
import { answerKeeper, type AnswerKeeper, type OpenTransaction } from './answer-keeper.js';
import { isTransactionConflict } from './errors.js';
import { statementOf, type Statement } from './query.js';
import { beginBounded, toError } from './statement-timeout.js';

export type { Statement };

/** Where statements run: the pool (each its own transaction), or one open transaction. */
export interface SqlSession {
  /** Runs one or more statements without parameters (simple query protocol). */
  exec(sql: string): Promise<void>;
  /**
   * Runs one statement; its rows come back untyped. For DDL, the migrations and libraries' own SQL,
   * whose rows are not read or are checked: rows the service reads come from a built query (`all`).
   */
  rows(sql: string, params?: unknown[]): Promise<unknown[]>;
  /** The rows of a built query (query.ts), typed as it selects them. */
  all<O>(built: Compilable<O>): Promise<O[]>;
  /** The first row of a built query, if any. */
  first<O>(built: Compilable<O>): Promise<O | undefined>;
  /** Runs a built write; answers how many rows it wrote. */
  write(built: Compilable<unknown>): Promise<number>;
}

export interface SqlDatabase extends SqlSession {
  /**
   * Runs `work` in one interactive transaction: rows it locks (`SELECT … FOR UPDATE`) stay locked
   * until it commits, so a read-modify-write decides on what it then writes. `work` must only touch
   * the database through `tx`: it runs again when PostgreSQL aborts it for a deadlock or a
   * serialization failure. Under an Idempotency-Key it does not commit: the answer keeper commits
   * it with the answer.
   */
  transaction<T>(work: (tx: SqlSession) => Promise<T>): Promise<T>;
  /**
   * Runs `steps` in one transaction sent at once (pg's pipeline mode): one round trip, and no lock
   * waits on the client between statements. Each statement decides in SQL what the one before it
   * found, since none can be chosen after seeing another's answer. Returns each built query's rows
   * under its step's name; a failing statement aborts the rest (they answer 25P02) and throws its error.
   * Under an Idempotency-Key it does not commit: the answer keeper commits it with the answer.
   */
  pipeline<S extends PipelineSteps>(steps: S, options?: PipelineOptions): Promise<PipelineResults<S>>;
}

/** One step of a pipeline: a built query, whose rows come back typed, or a statement run for its effect. */
export type PipelineStep = Compilable<unknown> | Statement;

/** A pipeline's steps by name, sent in the order they are written; a list runs its steps in order. */
export type PipelineSteps = Record<string, PipelineStep | readonly PipelineStep[]>;

/** Each built query's rows under its step's name; a statement or a list gives back nothing. */
export type PipelineResults<S extends PipelineSteps> = {
  [K in keyof S]: S[K] extends Compilable<infer O> ? O[] : undefined;
};

const isBuilt = (step: PipelineStep): step is Compilable<unknown> => 'compile' in step;
const isList = (step: PipelineStep | readonly PipelineStep[]): step is readonly PipelineStep[] => Array.isArray(step);

/** The steps as the statements sent, each with the name it answers to (undefined: not read). */
function flatten(steps: PipelineSteps): { statements: Statement[]; names: (string | undefined)[] } {
  const statements: Statement[] = [];
  const names: (string | undefined)[] = [];
  for (const [name, step] of Object.entries(steps)) {
    if (isList(step)) {
      for (const one of step) {
        statements.push(isBuilt(one) ? statementOf(one) : one);
        names.push(undefined);
      }
    } else {
      statements.push(isBuilt(step) ? statementOf(step) : step);
      names.push(isBuilt(step) ? name : undefined);
    }
  }
  return { statements, names };
}

export interface PipelineOptions {
  /**
   * False for a transaction a crash may lose without harm (the login throttle's counts): its
   * COMMIT does not wait for the WAL to reach the disk (`synchronous_commit = off`), so the rows it
   * locked are free at once. A row every login locks (a shared address's budget) would otherwise be
   * held through a disk flush per login, and logins would queue on it, not on argon2. A crash loses
   * at most the last few hundred milliseconds of such transactions, never a half of one. Under an
   * Idempotency-Key the transaction stays durable: it also writes the answer kept for retries.
   */
  durable?: boolean;
}

const COMMIT_WITHOUT_FLUSH = 'SET LOCAL synchronous_commit = off';

/** A statement as pg sends it: under a name when it is to be prepared. */
type Query = (statement: Statement) => pg.QueryConfig;

/** Past this many distinct texts (each kept by every connection of the pool), the rest go unnamed. */
const MAX_PREPARED = 500;

/**
 * Named statements, which PostgreSQL parses and plans once per connection and then only binds and
 * runs: a third of the server's work on a login's statements. Only on a connection that reaches
 * PostgreSQL directly: a transaction-mode pooler runs a client's transactions on server
 * connections that never saw what another one prepared. Names are given per text in order of first
 * use, so each text has one name in this process (pg prepares it on each connection at first use).
 */
function preparing(): Query {
  const names = new Map<string, string>();
  return ({ text, values }) => {
    let name = names.get(text);
    if (name === undefined && names.size < MAX_PREPARED) {
      name = `s${names.size + 1}`;
      names.set(text, name);
    }
    return name === undefined ? { text, values } : { name, text, values };
  };
}

const unnamed: Query = ({ text, values }) => ({ text, values });

function pgSession(client: pg.Pool | pg.ClientBase, query: Query): SqlSession {
  // pg hands rows over as `any`: a built query's rows are what its select says (the types
  // generated from the models); a plain statement's are left unknown.
  const run = (statement: Statement) => client.query(query(statement));
  return {
    exec: async (sql) => {
      await client.query(sql);
    },
    rows: async (text: string, values: unknown[] = []): Promise<unknown[]> => (await run({ text, values })).rows,
    all: async <O>(built: Compilable<O>): Promise<O[]> => (await run(statementOf(built))).rows,
    first: async <O>(built: Compilable<O>): Promise<O | undefined> => (await run(statementOf(built))).rows[0],
    write: async (built) => (await run(statementOf(built))).rowCount ?? 0,
  };
}

/**
 * Statements on a connection of the caller's own, such as a dump's, whose reads share one snapshot:
 * unnamed, and without the pool's transactions or retries.
 */
export const clientSession = (client: pg.ClientBase): SqlSession => pgSession(client, unnamed);

export interface SqlOptions {
  /** Bounds every transaction (see statement-timeout.ts). */
  statementTimeoutMs?: number;
  /** Whether the pool reaches PostgreSQL directly, so statements may be prepared (see `preparing`). */
  direct?: boolean;
}

/** Plain SQL on `pool`. */
export function pgSql(pool: pg.Pool, { statementTimeoutMs, direct = false }: SqlOptions = {}): SqlDatabase {
  const begin = beginBounded(statementTimeoutMs);
  const query = direct ? preparing() : unnamed;
  const database: SqlDatabase = {
    ...pgSession(pool, query),
    transaction: async (work) => {
      const keeper = answerKeeper();
      await keeper?.beforeWrite();
      for (let attempt = 1; ; attempt++) {
        try {
          return await transactionOnce(pool, begin, query, work, keeper);
        } catch (error) {
          if (attempt >= CONFLICT_ATTEMPTS || !isTransactionConflict(error)) throw error;
        }
      }
    },
    pipeline: async <S extends PipelineSteps>(steps: S, options?: PipelineOptions): Promise<PipelineResults<S>> => {
      const { statements, names } = flatten(steps);
      const results = await runPipeline(statements, options);
      const named: Record<string, unknown[] | undefined> = Object.fromEntries(
        Object.keys(steps).map((key) => [key, undefined]),
      );
      names.forEach((name, index) => {
        if (name !== undefined) named[name] = results[index];
      });
      // pg hands rows over untyped: each built query's rows are what its select says.
      return named as PipelineResults<S>;
    },
  };
  return database;

  async function runPipeline(statements: Statement[], { durable = true }: PipelineOptions = {}): Promise<unknown[][]> {
    const keeper = answerKeeper();
    await keeper?.beforeWrite();
    // An answer kept under an Idempotency-Key is written with its change, durably.
    const opening = durable || keeper ? begin : `${begin}; ${COMMIT_WITHOUT_FLUSH}`;
    // A deadlock or serialization failure aborts one transaction of several; run again, it succeeds.
    for (let attempt = 1; ; attempt++) {
      try {
        return await (keeper
          ? pipelineKept(pool, opening, statements.map(query), keeper)
          : pipelineOnce(pool, opening, statements.map(query)));
      } catch (error) {
        if (attempt >= CONFLICT_ATTEMPTS || !isTransactionConflict(error)) throw error;
      }
    }
  }
}

const CONFLICT_ATTEMPTS = 5;

async function transactionOnce<T>(
  pool: pg.Pool,
  begin: string,
  query: Query,
  work: (tx: SqlSession) => Promise<T>,
  keeper: AnswerKeeper | undefined,
): Promise<T> {
  const client = await pool.connect();
  let result: T;
  try {
    await client.query(begin);
    result = await work(pgSession(client, query));
  } catch (error) {
    // A failed ROLLBACK means a lost connection, which the pool must not hand out again.
    const rolledBack = await client.query('ROLLBACK').then(
      () => undefined,
      (reason: unknown) => toError(reason),
    );
    client.release(rolledBack);
    throw error;
  }
  if (!keeper) {
    await endOn(client, [client.query('COMMIT')]);
    return result;
  }
  await keeper.keep(openOn(client));
  return result;
}

/** Ends a transaction on `client` with `steps` (its last ones), then hands the connection back. */
async function endOn(client: pg.PoolClient, steps: Promise<unknown>[]): Promise<void> {
  const ended = await Promise.allSettled(steps);
  const last = ended[ended.length - 1];
  client.release(last?.status === 'rejected' ? toError(last.reason) : undefined);
  const refused = ended.find((step): step is PromiseRejectedResult => step.status === 'rejected');
  if (refused) throw refused.reason;
}

/** The transaction open on `client`, for the answer keeper to commit with the answer or roll back. */
const openOn = (client: pg.PoolClient): OpenTransaction => ({
  // A failed `last` aborts the transaction: the COMMIT then answers ROLLBACK, and `endOn` throws `last`'s error.
  commit: (last) => endOn(client, [...(last ? [client.query(last.text, last.values)] : []), client.query('COMMIT')]),
  rollback: () => endOn(client, [client.query('ROLLBACK')]),
});

/**
 * Queues `statements` on `client` as one write to the server: pg writes each statement's messages
 * as it queues it, a system call each, so a pipeline of ten statements took ten; corked, they leave
 * together (a pipelined client sends what it queues at once; another sends one at a time all the same).
 */
function sendTogether(client: pg.PoolClient, statements: (pg.QueryConfig | string)[]): Promise<pg.QueryResult>[] {
  const stream = client instanceof pg.Client ? client.connection.stream : undefined;
  stream?.cork();
  try {
    return statements.map((statement) => client.query(statement));
  } finally {
    stream?.uncork();
  }
}

async function pipelineOnce(pool: pg.Pool, begin: string, statements: pg.QueryConfig[]): Promise<unknown[][]> {
  const client = await pool.connect();
  const sent = sendTogether(client, [begin, ...statements, 'COMMIT']);
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
async function pipelineKept(
  pool: pg.Pool,
  begin: string,
  statements: pg.QueryConfig[],
  keeper: AnswerKeeper,
): Promise<unknown[][]> {
  const client = await pool.connect();
  const settled = await Promise.allSettled(sendTogether(client, [begin, ...statements]));
  const [opened] = settled;
  const failed = settled.find((step): step is PromiseRejectedResult => step.status === 'rejected');
  if (opened?.status === 'rejected') {
    client.release(toError(opened.reason));
    throw opened.reason;
  }
  const open = openOn(client);
  if (failed) {
    await open.rollback().catch(() => undefined);
    throw firstCause(settled.slice(1), failed.reason);
  }
  await keeper.keep(open);
  return settled.slice(1).map((step) => (step.status === 'fulfilled' ? step.value.rows : []));
}

// After the statement that failed, the others fail for the aborted transaction (25P02): the first
// failure is the cause.
function firstCause(steps: PromiseSettledResult<pg.QueryResult>[], fallback: unknown): unknown {
  const first = steps.find((step): step is PromiseRejectedResult => step.status === 'rejected');
  return first ? first.reason : fallback;
}
