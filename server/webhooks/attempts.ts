import { sql } from 'kysely';
import { tables } from '../db/query.js';
import type { SqlSession } from '../db/sql.js';

/**
 * Holds, until the transaction ends, the right to change one event's attempts at one webhook: the
 * worker recording an outcome and scheduling the next attempt, and manual retries, take it, so
 * attempt numbers are given out one at a time and an event never has two attempts due at once.
 */
export async function lockAttemptsOf(tx: SqlSession, webhookId: string, eventId: string): Promise<void> {
  const key = `webhook attempts ${webhookId} ${eventId}`;
  await tx.all(tables.selectNoFrom(sql<void>`pg_advisory_xact_lock(hashtextextended(${key}, 0))`.as('locked')));
}
