import type { Prisma, PrismaClient } from '../generated/prisma/client.js';
import { isTransactionConflict } from './errors.js';

// Prisma's defaults (2 s to start, 5 s in all) are short for requests queued on one row lock under load.
const TIMEOUTS = { maxWait: 10_000, timeout: 20_000 };
// A deadlock or serialization failure aborts one transaction of several; run again, it succeeds.
const ATTEMPTS = 5;

/**
 * Runs `work` in one interactive transaction: rows it locks (`SELECT … FOR UPDATE`) stay locked
 * until it commits, so a read-modify-write decides on what it then writes. `work` must only touch
 * the database through `tx`: it may run again when PostgreSQL aborts it for a deadlock.
 */
export async function inTransaction<T>(prisma: PrismaClient, work: (tx: Prisma.TransactionClient) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await prisma.$transaction(work, TIMEOUTS);
    } catch (error) {
      if (attempt >= ATTEMPTS || !isTransactionConflict(error)) throw error;
    }
  }
}
