import type { Prisma } from '../generated/prisma/client.js';

/**
 * Holds, until the transaction ends, the right to change one event's attempts at one webhook: the
 * worker recording an outcome and scheduling the next attempt, and manual retries, take it, so
 * attempt numbers are given out one at a time and an event never has two attempts due at once.
 */
export async function lockAttemptsOf(tx: Prisma.TransactionClient, webhookId: string, eventId: string): Promise<void> {
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${`webhook attempts ${webhookId} ${eventId}`}, 0))`;
}
