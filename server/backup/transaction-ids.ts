import { z } from 'zod';
import { checkedRows } from '../db/checked-rows.js';
import { BackupStopped, connect, disconnect, stoppedBy } from './stopping.js';

// Small enough that a stop signal is not kept waiting on an external server (a fraction of a second).
const PER_ROUND = 100_000;

/**
 * Makes the server's next transaction id reach `next`. Event log positions are transaction ids
 * (server/events/outbox.ts): restored events keep theirs, so new ones must come after them, and a
 * client's /changes cursor must stay behind everything written from now on. A new server counts
 * from a few hundred; there is no SQL to set the counter, so this spends ids, one tiny committed
 * transaction each (about 250,000 a second here). Run again, it goes on from where it is.
 */
export async function advanceTransactionIds(
  url: string,
  next: bigint,
  log: (message: string) => void = () => undefined,
  stop?: AbortSignal,
): Promise<bigint> {
  const client = await connect(url, stop);
  try {
    await client.query('SET synchronous_commit = off');
    await client.query('SET statement_timeout = 0');
    const current = async () => {
      const [row] = await checkedRows(client, z.object({ id: z.string() }), 'SELECT pg_current_xact_id()::text AS id');
      return BigInt(row?.id ?? '0');
    };
    const start = await current();
    if (start >= next) return 0n;
    log(`advancing transaction ids from ${start} to ${next} (the event log's positions)`);
    for (let now = start; now < next; now = await current()) {
      if (stop?.aborted) throw new BackupStopped(`stopped by ${stoppedBy(stop)}`);
      const round = Math.min(PER_ROUND, Number(next - now));
      // Each COMMIT ends a transaction that was given an id (procedures may commit since PostgreSQL 11).
      await client.query(
        `DO $$ BEGIN FOR i IN 1..${round} LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$`,
      );
    }
    return next - start;
  } finally {
    await disconnect(client);
  }
}
