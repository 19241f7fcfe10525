import { RateLimiterPrisma, RateLimiterRes } from 'rate-limiter-flexible';
import type { Config } from '../config.js';
import type { PrismaClient } from '../db/database.js';
import { AppError } from '../http/errors.js';

/**
 * Counts failed logins per account and per client address in the database, so every instance
 * sees the same counts. Over the limit, login answers 429 until the window passes.
 */
export function loginThrottle(prisma: PrismaClient, config: Config['loginThrottle']) {
  const common = { storeClient: prisma, tableName: 'rateLimit', duration: config.windowSeconds };
  const perAccount = new RateLimiterPrisma({ ...common, keyPrefix: 'login-account', points: config.maxFailuresPerAccount });
  const perAddress = new RateLimiterPrisma({ ...common, keyPrefix: 'login-address', points: config.maxFailuresPerAddress });

  const tooMany = (msBeforeNext: number) =>
    new AppError('rate_limited', 'Too many failed logins; try again later', {
      headers: { 'Retry-After': String(Math.max(1, Math.ceil(msBeforeNext / 1000))) },
    });

  return {
    /** Throws 429 when the account or the address has used up its failures. */
    async check(email: string, address: string): Promise<void> {
      const [account, client] = await Promise.all([perAccount.get(email), perAddress.get(address)]);
      for (const [res, limit] of [[account, config.maxFailuresPerAccount], [client, config.maxFailuresPerAddress]] as const) {
        if (res && res.consumedPoints >= limit) throw tooMany(res.msBeforeNext);
      }
    },
    async recordFailure(email: string, address: string): Promise<void> {
      await Promise.all([
        perAccount.penalty(email, 1),
        perAddress.penalty(address, 1),
      ]).catch((error: unknown) => {
        if (!(error instanceof RateLimiterRes)) throw error;
      });
    },
    async recordSuccess(email: string): Promise<void> {
      await perAccount.delete(email);
    },
  };
}
export type LoginThrottle = ReturnType<typeof loginThrottle>;
