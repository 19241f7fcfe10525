import { randomUUID } from 'node:crypto';
import type { SqlSession } from './sql.js';

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
  const taken = await sql.rows<{ holder: string }>(
    `INSERT INTO maintenance_leases (job, holder, expires_at) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
     ON CONFLICT (job) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
     WHERE maintenance_leases.expires_at < now()
     RETURNING holder`,
    [job, holder, ttlMs],
  );
  if (taken.length === 0) return { ran: false };
  try {
    return { ran: true, result: await work() };
  } finally {
    await sql.rows('DELETE FROM maintenance_leases WHERE job = $1 AND holder = $2', [job, holder]);
  }
}
