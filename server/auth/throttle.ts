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

  const spend = async (limiter: RateLimiterPrisma, key: string) => {
    try {
      await limiter.consume(key);
    } catch (error) {
      if (error instanceof RateLimiterRes) throw tooMany(error.msBeforeNext);
      throw error;
    }
  };

  return {
    /**
     * Takes one attempt from the account's and the address's budgets before the password is
     * checked: the database counts atomically, so simultaneous guesses cannot all slip through.
     * 429 once either budget is spent.
     */
    async begin(email: string, address: string): Promise<void> {
      await spend(perAccount, email);
      await spend(perAddress, address);
    },
    /** The password was right: the attempt was no failure. */
    async succeeded(email: string, address: string): Promise<void> {
      await Promise.all([perAccount.delete(email), perAddress.reward(address, 1)]);
    },
  };
}
export type LoginThrottle = ReturnType<typeof loginThrottle>;
