import pg from 'pg';

/**
 * The statement timeout where a pooler may be in front, set per transaction (`SET LOCAL`), never per
 * session: behind a transaction-mode pooler (PgBouncer) consecutive transactions of one connection
 * run on different server connections, and a start-up parameter is refused there ("unsupported
 * startup parameter"). A pool known to be direct has it as a start-up parameter instead
 * (database.ts), and a statement there runs without a transaction around it.
 */
const setLocalTimeout = (timeoutMs: number) => `SET LOCAL statement_timeout = ${Math.trunc(timeoutMs)}`;

/** What opens every transaction of plain SQL: BEGIN and the timeout in one round trip. */
export const beginBounded = (timeoutMs: number | undefined): string =>
  timeoutMs === undefined ? 'BEGIN' : `BEGIN; ${setLocalTimeout(timeoutMs)}`;

type QueryText = string | pg.QueryConfig;

/**
 * `pool` whose `query()` (a statement outside any transaction) runs in a transaction of its own with the timeout set: BEGIN, the statement and COMMIT go
 * out together on a pipelined connection, so it still costs one round trip.
 */
export function boundedPool(pool: pg.Pool, timeoutMs: number): pg.Pool {
  const begin = beginBounded(timeoutMs);
  const query = async (text: QueryText, values?: unknown[]): Promise<pg.QueryResult> => {
    const client = await pool.connect();
    const [opened, result, committed] = await Promise.allSettled([
      client.query(begin),
      client.query(text, values),
      client.query('COMMIT'),
    ]);
    // A failed statement only aborts the transaction (its COMMIT answers ROLLBACK); a failed BEGIN
    // or COMMIT means a lost connection, which the pool must not hand out again.
    const broken = [opened, committed].find((step): step is PromiseRejectedResult => step.status === 'rejected');
    client.release(broken ? toError(broken.reason) : undefined);
    if (result.status === 'rejected') throw result.reason;
    if (broken) throw broken.reason;
    return result.value;
  };
  return new Proxy(pool, {
    get: (target, property, receiver) => (property === 'query' ? query : Reflect.get(target, property, receiver)),
  });
}

export const toError = (reason: unknown): Error => (reason instanceof Error ? reason : new Error(String(reason)));

/**
 * Rethrows a failed statement's error with the stack of whoever awaited it, as pg's own promises
 * do: a callback's stack ends in the socket's code, and the request log's 5xx lines would lose the
 * statement's caller.
 */
function withCallersStack(error: unknown): never {
  if (error instanceof Error) Error.captureStackTrace(error);
  throw error;
}

/**
 * `pool` whose `query()` (a statement alone, on a direct connection) keeps its connection when the
 * statement fails in the server (a timeout, a unique violation): pg.Pool's own `query()` closes a
 * connection released with any error, and with it every statement prepared there, which would cost
 * a reconnect per timed-out request just when the database is overloaded. A connection that broke
 * is dropped all the same (pg-pool drops one that can no longer take queries).
 */
export function keptConnectionPool(pool: pg.Pool): pg.Pool {
  // pg's callbacks, not its promises: this runs for every statement outside a transaction, and each
  // promise pg makes (and awaits here) cost as much as the rest of this function.
  const query = (text: QueryText, values?: unknown[]): Promise<pg.QueryResult> =>
    new Promise<pg.QueryResult>((resolve, reject) => {
      pool.connect((connectError, client, release) => {
        if (connectError || !client) return reject(connectError ?? new Error('The pool gave no connection'));
        // Once only: a connection that ends errors the statements it still holds, this one included.
        let released = false;
        const done = (error: Error | undefined, result?: pg.QueryResult) => {
          if (released) return;
          released = true;
          if (error || !result) {
            release(error instanceof pg.DatabaseError ? undefined : error);
            return reject(error ?? new Error('The statement gave no result'));
          }
          release();
          resolve(result);
        };
        try {
          if (values === undefined) client.query(text, done);
          else if (typeof text === 'string') client.query(text, values, done);
          else client.query({ ...text, values }, done);
        } catch (error) {
          // Thrown before it was sent (pg reports most such errors to the callback).
          done(toError(error));
        }
      });
    }).catch(withCallersStack);
  return new Proxy(pool, {
    get: (target, property, receiver) => (property === 'query' ? query : Reflect.get(target, property, receiver)),
  });
}
