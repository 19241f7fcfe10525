import { RateLimiterPrisma, RateLimiterRes } from 'rate-limiter-flexible';
import type { Config } from '../config.js';
import type { PrismaClient } from '../db/database.js';
import type { SqlSession } from '../db/sql.js';
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
  /** The key's prefix in rate_limits (rate-limiter-flexible's `keyPrefix:key`, so counts carry over). */
  prefix: string;
  points: number;
  exceeded: string;
}

// One statement takes an attempt from every budget of a login: rows locked in key order (no deadlock
// with a concurrent login sharing keys); an expired window starts afresh.
const TAKE_ATTEMPT = `
  INSERT INTO rate_limits AS r (key, points, expire)
  SELECT key, 1, $2::timestamptz FROM unnest($1::text[]) AS key ORDER BY key
  ON CONFLICT (key) DO UPDATE SET
    points = CASE WHEN r.expire <= $3::timestamptz THEN 1 ELSE r.points + 1 END,
    expire = CASE WHEN r.expire <= $3::timestamptz THEN EXCLUDED.expire ELSE r.expire END
  RETURNING key, points, expire`;

// One statement settles an attempt: `cleared` budgets start afresh, `refunded` ones get the attempt back.
const SETTLE_ATTEMPT = `
  WITH locked AS (SELECT key FROM rate_limits WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE),
  cleared AS (DELETE FROM rate_limits r USING locked l WHERE r.key = l.key AND r.key = ANY($2::text[]))
  UPDATE rate_limits r SET points = r.points - 1 FROM locked l
  WHERE r.key = l.key AND r.key = ANY($3::text[]) AND r.expire > $4::timestamptz`;

/** Windows of the login budgets that ended over an hour ago are deleted this often. */
const PURGE_EVERY_MS = 5 * 60_000;
const PURGE_AFTER_MS = 3_600_000;

/**
 * Counts failed logins in the database, so every instance sees the same counts: strictly per
 * (account, client address) pair, per address, and per account across all addresses with a high
 * ceiling. A stranger guessing from their own address uses up their pair, not the owner's.
 * Plain SQL, one statement before the password check and one after: a login storm is argon2's, not
 * the bookkeeping's.
 */
export function loginThrottle(sql: SqlSession, config: Config['loginThrottle']) {
  const windowMs = config.windowSeconds * 1000;
  const pair: Budget = { prefix: 'login-pair', points: config.maxFailuresPerAccountAddress, exceeded: 'Too many failed logins for this account from your address' };
  const address: Budget = { prefix: 'login-address', points: config.maxFailuresPerAddress, exceeded: 'Too many failed logins from your address' };
  const account: Budget = { prefix: 'login-account', points: config.maxFailuresPerAccount, exceeded: 'Too many failed logins for this account' };
  // A known device (a valid device token for the account) has a budget of its own, and only that.
  const device: Budget = { prefix: 'login-device', points: config.maxFailuresPerDevice, exceeded: 'Too many failed logins from this device' };

  /** The budgets an attempt counts against, by key; the first that is spent names the 429. */
  const budgetsOf = (email: string, on: string, deviceId: string | undefined): [string, Budget][] =>
    deviceId === undefined
      ? [
          [`${pair.prefix}:${JSON.stringify([email, on])}`, pair],
          [`${address.prefix}:${on}`, address],
          [`${account.prefix}:${email}`, account],
        ]
      : [[`${device.prefix}:${deviceId}`, device]];

  const settle = async (cleared: string[], refunded: string[]) => {
    if (cleared.length + refunded.length === 0) return;
    await sql.rows(SETTLE_ATTEMPT, [[...cleared, ...refunded], cleared, refunded, new Date()]);
  };

  const purge = setInterval(() => {
    sql.rows("DELETE FROM rate_limits WHERE key LIKE 'login-%' AND expire < $1::timestamptz", [new Date(Date.now() - PURGE_AFTER_MS)]).catch(() => undefined);
  }, PURGE_EVERY_MS);
  purge.unref();

  return {
    /**
     * Takes one attempt from each budget before the password is checked: the database counts
     * atomically, so simultaneous guesses cannot all slip through. 429 once one is spent (the
     * others get their point back: no attempt was made). `deviceId` names a known device.
     */
    async begin(email: string, address: string, deviceId?: string): Promise<void> {
      const budgets = budgetsOf(email, address, deviceId);
      const now = new Date();
      const counted = await sql.rows<{ key: string; points: number; expire: Date | null }>(TAKE_ATTEMPT, [budgets.map(([key]) => key), new Date(now.getTime() + windowMs), now]);
      const byKey = new Map(counted.map((row) => [row.key, row]));
      const spent = budgets.filter(([key, budget]) => (byKey.get(key)?.points ?? 0) > budget.points);
      const [first] = spent;
      if (!first) return;
      await settle([], budgets.filter((b) => !spent.includes(b)).map(([key]) => key));
      const expire = byKey.get(first[0])?.expire;
      throw throttled(first[1].exceeded, expire ? expire.getTime() - Date.now() : windowMs);
    },
    /** The password was right: the attempt was no failure, and the pair (or the device) starts afresh. */
    async succeeded(email: string, address: string, deviceId?: string): Promise<void> {
      const keys = budgetsOf(email, address, deviceId).map(([key]) => key);
      await settle(keys.slice(0, 1), keys.slice(1));
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
