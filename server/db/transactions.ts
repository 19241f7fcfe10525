import type { Prisma, PrismaClient } from '../generated/prisma/client.js';
import { answerKeeper, type AnswerKeeper, type KeptStatement } from './answer-keeper.js';
import { isTransactionConflict } from './errors.js';

// Prisma's defaults (2 s to start, 5 s in all) are short for requests queued on one row lock under load.
const TIMEOUTS = { maxWait: 10_000, timeout: 20_000 };
// A deadlock or serialization failure aborts one transaction of several; run again, it succeeds.
const ATTEMPTS = 5;

/**
 * Runs `work` in one interactive transaction: rows it locks (`SELECT … FOR UPDATE`) stay locked
 * until it commits, so a read-modify-write decides on what it then writes. `work` must only touch
 * the database through `tx`: it may run again when PostgreSQL aborts it for a deadlock. Under an
 * Idempotency-Key it does not commit: the answer keeper commits it with the answer.
 */
export async function inTransaction<T>(
  prisma: PrismaClient,
  work: (tx: Prisma.TransactionClient) => Promise<T>,
): Promise<T> {
  const keeper = answerKeeper();
  await keeper?.beforeWrite();
  for (let attempt = 1; ; attempt++) {
    try {
      return await (keeper ? keptTransaction(prisma, work, keeper) : prisma.$transaction(work, TIMEOUTS));
    } catch (error) {
      if (attempt >= ATTEMPTS || !isTransactionConflict(error)) throw error;
    }
  }
}

/** Thrown inside the transaction to roll it back. */
class RolledBack extends Error {}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(reason: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve: (value: T) => void = () => undefined;
  let reject: (reason: unknown) => void = () => undefined;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * `work` in an interactive transaction that, once the work is done, waits for the keeper's word:
 * the answer's statement and the commit, or a rollback. Resolves with the work's result as soon as
 * the keeper holds the transaction; its commit still fits in Prisma's timeout, or it rolls back.
 */
function keptTransaction<T>(
  prisma: PrismaClient,
  work: (tx: Prisma.TransactionClient) => Promise<T>,
  keeper: AnswerKeeper,
): Promise<T> {
  const result = deferred<T>();
  const decision = deferred<KeptStatement | undefined | 'rollback'>();
  const ended = deferred<void>();
  ended.promise.catch(() => undefined); // awaited by commit and rollback; unobserved if neither came
  let worked = false;
  prisma
    .$transaction(async (tx) => {
      const value = await work(tx);
      worked = true;
      keeper
        .keep({
          commit: (last) => {
            decision.resolve(last);
            return ended.promise;
          },
          rollback: () => {
            decision.resolve('rollback');
            return ended.promise.catch(() => undefined);
          },
        })
        .then(() => result.resolve(value), result.reject);
      const last = await decision.promise;
      if (last === 'rollback') throw new RolledBack();
      if (last) await tx.$executeRawUnsafe(last.text, ...(last.values ?? []));
    }, TIMEOUTS)
    .then(ended.resolve, (error: unknown) => (worked ? ended.reject(error) : result.reject(error)));
  return result.promise;
}
