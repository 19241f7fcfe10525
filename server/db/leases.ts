import { randomUUID } from 'node:crypto';
import type { SqlSession } from './sql.js';
import { sql as sql_ } from 'kysely';
import { tables } from './query.js';

/**
 * Runs `work` only if no other instance holds the job's lease, and holds it meanwhile; answers
 * whether it ran. A lease outlives a crashed holder by at most `ttlMs`. The clock is the
 * database's, so instances' clocks need not agree.
 */
export async function underLease<T>(
  sql: SqlSession,
  job: string,
  ttlMs: number,
  work: () => Promise<T>,
): Promise<{ ran: true; result: T } | { ran: false }> {
  const holder = randomUUID();
  const taken = await sql.all(
    tables
      .insertInto('maintenance_leases')
      .values({ job, holder, expires_at: sql_`now() + ${ttlMs} * interval '1 millisecond'` })
      .onConflict((conflict) =>
        conflict
          .column('job')
          .doUpdateSet({ holder: (eb) => eb.ref('excluded.holder'), expires_at: (eb) => eb.ref('excluded.expires_at') })
          .where('maintenance_leases.expires_at', '<', sql_<Date>`now()`),
      )
      .returning('holder'),
  );
  if (taken.length === 0) return { ran: false };
  try {
    return { ran: true, result: await work() };
  } finally {
    await sql.write(tables.deleteFrom('maintenance_leases').where('job', '=', job).where('holder', '=', holder));
  }
}
