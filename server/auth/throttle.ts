import { RateLimiterPrisma, RateLimiterRes } from 'rate-limiter-flexible';
import type { Config } from '../config.js';
import type { PrismaClient } from '../db/database.js';
import { AppError } from '../http/errors.js';

/** "in 40 seconds" / "in 12 minutes": when a throttled client may try again. */
function whenAgain(msBeforeNext: number): string {
  const seconds = Math.max(1, Math.ceil(msBeforeNext / 1000));
  return seconds < 120 ? `in ${seconds} seconds` : `in ${Math.ceil(seconds / 60)} minutes`;
}

/** 429 with Retry-After, its detail saying what was exceeded and when to try again. */
function throttled(what: string, msBeforeNext: number): AppError {
  const retryAfter = Math.max(1, Math.ceil(msBeforeNext / 1000));
  const at = new Date(Date.now() + retryAfter * 1000).toISOString();
  return new AppError('rate_limited', `${what}; try again ${whenAgain(msBeforeNext)} (at ${at})`, {
    headers: { 'Retry-After': String(retryAfter) },
  });
}

interface Budget {
  limiter: RateLimiterPrisma;
  key: (email: string, address: string) => string;
  exceeded: string;
}

/**
 * Counts failed logins in the database, so every instance sees the same counts: strictly per
 * (account, client address) pair, per address, and per account across all addresses with a high
 * ceiling. A stranger guessing from their own address uses up their pair, not the owner's.
 */
export function loginThrottle(prisma: PrismaClient, config: Config['loginThrottle']) {
  const common = { storeClient: prisma, tableName: 'rateLimit', duration: config.windowSeconds };
  const budgets: Budget[] = [
    {
      limiter: new RateLimiterPrisma({ ...common, keyPrefix: 'login-pair', points: config.maxFailuresPerAccountAddress }),
      key: (email, address) => JSON.stringify([email, address]),
      exceeded: 'Too many failed logins for this account from your address',
    },
    {
      limiter: new RateLimiterPrisma({ ...common, keyPrefix: 'login-address', points: config.maxFailuresPerAddress }),
      key: (_email, address) => address,
      exceeded: 'Too many failed logins from your address',
    },
    {
      limiter: new RateLimiterPrisma({ ...common, keyPrefix: 'login-account', points: config.maxFailuresPerAccount }),
      key: (email) => email,
      exceeded: 'Too many failed logins for this account',
    },
  ];

  // A known device (a valid device token for the account) has a budget of its own, and only that.
  const device: Budget = {
    limiter: new RateLimiterPrisma({ ...common, keyPrefix: 'login-device', points: config.maxFailuresPerDevice }),
    key: (_email, deviceId) => deviceId,
    exceeded: 'Too many failed logins from this device',
  };
  const budgetsOf = (deviceId: string | undefined) => (deviceId === undefined ? budgets : [device]);

  return {
    /**
     * Takes one attempt from each budget before the password is checked: the database counts
     * atomically, so simultaneous guesses cannot all slip through. 429 once one is spent (the
     * others get their point back: no attempt was made). `deviceId` names a known device.
     */
    async begin(email: string, address: string, deviceId?: string): Promise<void> {
      const taken: Budget[] = [];
      const on = deviceId ?? address;
      for (const budget of budgetsOf(deviceId)) {
        try {
          await budget.limiter.consume(budget.key(email, on));
          taken.push(budget);
        } catch (error) {
          if (!(error instanceof RateLimiterRes)) throw error;
          await Promise.all(taken.map((t) => t.limiter.reward(t.key(email, on), 1)));
          throw throttled(budget.exceeded, error.msBeforeNext);
        }
      }
    },
    /** The password was right: the attempt was no failure, and the pair starts afresh. */
    async succeeded(email: string, address: string, deviceId?: string): Promise<void> {
      if (deviceId !== undefined) return void (await device.limiter.delete(deviceId));
      const [pair, ...others] = budgets;
      await Promise.all([pair?.limiter.delete(pair.key(email, address)), ...others.map((b) => b.limiter.reward(b.key(email, address), 1))]);
    },
  };
}
export type LoginThrottle = ReturnType<typeof loginThrottle>;

/**
 * Registrations per client address per hour, counted in the database before the password is
 * hashed, so nobody keeps the hashing threads busy for everyone else. 0 turns it off.
 */
export function registrationThrottle(prisma: PrismaClient, perHour: number) {
  const limiter = perHour > 0 ? new RateLimiterPrisma({ storeClient: prisma, tableName: 'rateLimit', keyPrefix: 'register-address', points: perHour, duration: 3600 }) : undefined;
  return {
    async admit(address: string): Promise<void> {
      try {
        await limiter?.consume(address);
      } catch (error) {
        if (error instanceof RateLimiterRes) throw throttled(`At most ${perHour} registrations an hour from one address`, error.msBeforeNext);
        throw error;
      }
    },
  };
}
export type RegistrationThrottle = ReturnType<typeof registrationThrottle>;
