import type { Config } from './config.js';
import type { AppContext } from './context.js';
import { inTransaction } from './db/transactions.js';
import type { Prisma } from './generated/prisma/client.js';
import { AppError } from './http/errors.js';
import { isAdmin, type Principal } from './http/principal.js';

/** What one user may hold (API.md "Limits"), each under its configuration variable. */
export type Quota = keyof Config['quotas'];

const QUOTAS: Record<Quota, { variable: string; unit: string; used(db: Prisma.TransactionClient, userId: string): Promise<bigint> }> = {
  tasks: { variable: 'USER_MAX_TASKS', unit: 'tasks', used: async (db, userId) => BigInt(await db.task.count({ where: { ownerId: userId } })) },
  tags: { variable: 'USER_MAX_TAGS', unit: 'tags', used: async (db, userId) => BigInt(await db.tag.count({ where: { ownerId: userId } })) },
  storageBytes: {
    variable: 'USER_STORAGE_QUOTA_BYTES',
    unit: 'bytes of attachments',
    used: async (db, userId) => (await db.attachment.aggregate({ where: { uploadedBy: userId }, _sum: { size: true } }))._sum.size ?? 0n,
  },
};

/**
 * Checks that `adding` more of `quota` fits the caller's quota (admins are exempt). Inside a
 * transaction it holds the user's row until commit, so one user's concurrent creates are counted
 * one after another and cannot pass the quota together. (FOR NO KEY UPDATE: rows that merely
 * reference the user, such as the task being inserted, do not wait for it.)
 */
export async function claimQuota(db: Prisma.TransactionClient, ctx: AppContext, principal: Principal, quota: Quota, adding = 1): Promise<void> {
  if (isAdmin(principal)) return;
  await db.$queryRaw`SELECT 1 FROM users WHERE id = ${principal.userId}::uuid FOR NO KEY UPDATE`;
  const limit = ctx.config.quotas[quota];
  const { variable, unit, used } = QUOTAS[quota];
  if ((await used(db, principal.userId)) + BigInt(adding) > BigInt(limit)) {
    throw new AppError('quota_exceeded', `Quota "${quota}" reached: an account holds at most ${limit} ${unit} (${variable})`);
  }
}

/** Runs `create` in a transaction that first claims one more of `quota` for the caller. */
export function withinQuota<T>(ctx: AppContext, principal: Principal, quota: Quota, create: (tx: Prisma.TransactionClient) => Promise<T>): Promise<T> {
  return inTransaction(ctx.db.prisma, async (tx) => {
    await claimQuota(tx, ctx, principal, quota);
    return create(tx);
  });
}
