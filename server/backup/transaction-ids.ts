import pg from 'pg';

const PER_ROUND = 1_000_000;

/**
 * Makes the server's next transaction id reach `next`. Event log positions are transaction ids
 * (server/events/outbox.ts): restored events keep theirs, so new ones must come after them, and a
 * client's /changes cursor must stay behind everything written from now on. A new server counts
 * from a few hundred; there is no SQL to set the counter, so this spends ids, one tiny committed
 * transaction each (about 250,000 a second here).
 */
export async function advanceTransactionIds(
  url: string,
  next: bigint,
  log: (message: string) => void = () => undefined,
): Promise<bigint> {
  const client = new pg.Client({ connectionString: url, application_name: 'task-service restore' });
  await client.connect();
  try {
    await client.query('SET synchronous_commit = off');
    await client.query('SET statement_timeout = 0');
    const current = async () =>
      BigInt((await client.query<{ id: string }>('SELECT pg_current_xact_id()::text AS id')).rows[0]?.id ?? '0');
    const start = await current();
    if (start >= next) return 0n;
    log(`advancing transaction ids from ${start} to ${next} (the event log's positions)`);
    for (let now = start; now < next; now = await current()) {
      const round = Math.min(PER_ROUND, Number(next - now));
      // Each COMMIT ends a transaction that was given an id (procedures may commit since PostgreSQL 11).
      await client.query(
        `DO $$ BEGIN FOR i IN 1..${round} LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$`,
      );
    }
    return next - start;
  } finally {
    await client.end();
  }
}
