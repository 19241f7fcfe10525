import { sql, type Compilable } from 'kysely';
import type { Config } from '../config.js';
import { rawQuery, tables } from '../db/query.js';
import type { PipelineOptions, SqlDatabase } from '../db/sql.js';
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

/** A budget's count as a take leaves it. */
interface TakenRow {
  key: string;
  points: number;
  expire: Date | null;
}

/**
 * One statement takes an attempt from every budget in `keys`: rows locked in key order (no
 * deadlock with a concurrent login sharing keys); an expired window starts afresh. With `device`,
 * a device token's budget counts alone, but only when the token names the account that has this
 * email: the login reads that account in the same transaction, so the budgets are chosen without a
 * round trip of their own.
 */
const takeAttempt = (
  keys: string[],
  expire: Date,
  now: Date,
  device?: { keys: string[]; account: string; email: string },
): Compilable<TakenRow> =>
  rawQuery(sql<TakenRow>`
    INSERT INTO rate_limits AS r (key, points, expire)
    SELECT key, 1, ${expire}::timestamptz
    FROM unnest(CASE WHEN EXISTS (SELECT 1 FROM users WHERE id = ${device?.account ?? null}::uuid AND email = ${device?.email ?? null})
                     THEN ${device?.keys ?? []}::text[] ELSE ${keys}::text[] END) AS key
    ORDER BY key
    ON CONFLICT (key) DO UPDATE SET
      points = CASE WHEN r.expire <= ${now}::timestamptz THEN 1 ELSE r.points + 1 END,
      expire = CASE WHEN r.expire <= ${now}::timestamptz THEN EXCLUDED.expire ELSE r.expire END
    RETURNING key, points, expire`);

/** One statement settles an attempt: `cleared` budgets start afresh, `refunded` ones get the attempt back. */
const settleAttempt = (cleared: string[], refunded: string[], now: Date): Compilable<unknown> =>
  rawQuery(sql`
    WITH locked AS (SELECT key FROM rate_limits WHERE key = ANY(${[...cleared, ...refunded]}::text[]) ORDER BY key FOR UPDATE),
    cleared AS (DELETE FROM rate_limits r USING locked l WHERE r.key = l.key AND r.key = ANY(${cleared}::text[]))
    UPDATE rate_limits r SET points = r.points - 1 FROM locked l
    WHERE r.key = l.key AND r.key = ANY(${refunded}::text[]) AND r.expire > ${now}::timestamptz`);

/**
 * The throttle's transactions commit without waiting for the disk: every login locks its address's
 * budget, which logins from one address (an office behind one NAT) share, so a durable commit
 * would hold that row through a disk flush per login. A crash forgets at most the counts of the
 * last few hundred milliseconds.
 */
export const NOT_DURABLE: PipelineOptions = { durable: false };

/** Windows of the login budgets that ended over an hour ago are deleted this often. */
const PURGE_EVERY_MS = 5 * 60_000;
const PURGE_AFTER_MS = 3_600_000;
const HOUR_MS = 3_600_000;

/** A device token's claim: the account it was issued for, and the device. */
export interface ClaimedDevice {
  account: string;
  deviceId: string;
}

/** One login attempt's budgets, by key, as the take counted them. */
export interface Taken {
  keys: string[];
}

/**
 * Counts failed logins in the database, so every instance sees the same counts: strictly per
 * (account, client address) pair, per address, and per account across all addresses with a high
 * ceiling. A stranger guessing from their own address uses up their pair, not the owner's.
 * Plain SQL, one statement before the password check and one after, each sent with the login's
 * other statements: a login storm is argon2's, not the bookkeeping's.
 */
export function loginThrottle(db: SqlDatabase, config: Config['loginThrottle']) {
  const windowMs = config.windowSeconds * 1000;
  const pair: Budget = {
    prefix: 'login-pair',
    points: config.maxFailuresPerAccountAddress,
    exceeded: 'Too many failed logins for this account from your address',
  };
  const address: Budget = {
    prefix: 'login-address',
    points: config.maxFailuresPerAddress,
    exceeded: 'Too many failed logins from your address',
  };
  const account: Budget = {
    prefix: 'login-account',
    points: config.maxFailuresPerAccount,
    exceeded: 'Too many failed logins for this account',
  };
  // A known device (a valid device token for the account) has a budget of its own, and only that.
  const device: Budget = {
    prefix: 'login-device',
    points: config.maxFailuresPerDevice,
    exceeded: 'Too many failed logins from this device',
  };
  const budgets = [pair, address, account, device];
  const budgetOf = (key: string): Budget | undefined => budgets.find((budget) => key.startsWith(`${budget.prefix}:`));

  /** The budgets of an attempt without a known device, by key; the first that is spent names the 429. */
  const strangerKeys = (email: string, on: string): string[] => [
    `${pair.prefix}:${JSON.stringify([email, on])}`,
    `${address.prefix}:${on}`,
    `${account.prefix}:${email}`,
  ];
  const deviceKey = (deviceId: string) => `${device.prefix}:${deviceId}`;

  const settle = (cleared: string[], refunded: string[]) => settleAttempt(cleared, refunded, new Date());

  const purge = setInterval(() => {
    db.write(
      tables
        .deleteFrom('rate_limits')
        .where('key', 'like', 'login-%')
        .where('expire', '<', new Date(Date.now() - PURGE_AFTER_MS)),
    ).catch(() => undefined);
  }, PURGE_EVERY_MS);
  purge.unref();

  /**
   * 429 once a budget the take counted against is spent (the others get their point back: no
   * attempt was made); else the budgets taken.
   */
  const admit = async (counted: TakenRow[]): Promise<Taken> => {
    const keys = counted.map((row) => row.key);
    const spent = budgets.flatMap((budget) =>
      counted
        .filter((row) => budgetOf(row.key) === budget && row.points > budget.points)
        .map((row) => ({ row, budget })),
    );
    const [first] = spent;
    if (!first) return { keys };
    const unspent = keys.filter((key) => !spent.some(({ row }) => row.key === key));
    if (unspent.length > 0) {
      await db.pipeline({ refund: settle([], unspent) }, NOT_DURABLE);
    }
    const expire = first.row.expire;
    throw throttled(first.budget.exceeded, expire ? expire.getTime() - Date.now() : windowMs);
  };

  const take = (email: string, on: string, claimed?: ClaimedDevice): Compilable<TakenRow> => {
    const now = new Date();
    const device = claimed && { keys: [deviceKey(claimed.deviceId)], account: claimed.account, email };
    return takeAttempt(strangerKeys(email, on), new Date(now.getTime() + windowMs), now, device);
  };

  return {
    /**
     * The statement that takes one attempt from each budget before the password is checked: the
     * database counts atomically, so simultaneous guesses cannot all slip through. `claimed` is a
     * device token's claim, which counts when it names the account with this email. Its rows go
     * to `admit`.
     */
    take,
    admit,
    /** The statement for a right password: the attempt was no failure, and the pair (or the device) starts afresh. */
    succeeded(taken: Taken): Compilable<unknown> {
      const clears = (key: string) => key.startsWith(`${pair.prefix}:`) || key.startsWith(`${device.prefix}:`);
      return settle(
        taken.keys.filter(clears),
        taken.keys.filter((key) => !clears(key)),
      );
    },
    /** Takes an attempt for a check of a known account's password outside a login (no device): one round trip. */
    async begin(email: string, on: string): Promise<Taken> {
      const { counted } = await db.pipeline({ counted: take(email, on) }, NOT_DURABLE);
      return admit(counted);
    },
  };
}
export type LoginThrottle = ReturnType<typeof loginThrottle>;

/**
 * Registrations per client address per hour, counted in the database before the password is
 * hashed, so nobody keeps the hashing threads busy for everyone else: one statement takes a point
 * from the address's budget (the login budgets' table and upsert), and a spent budget is a 429
 * until its hour is over. 0 turns it off.
 */
export function registrationThrottle(db: SqlDatabase, perHour: number) {
  return {
    async admit(address: string): Promise<void> {
      if (perHour <= 0) return;
      const now = new Date();
      const [counted] = await db.all(
        takeAttempt([`register-address:${address}`], new Date(now.getTime() + HOUR_MS), now),
      );
      if (counted && counted.points > perHour) {
        const left = counted.expire ? counted.expire.getTime() - Date.now() : HOUR_MS;
        throw throttled(`At most ${perHour} registrations an hour from one address`, left);
      }
    },
  };
}
export type RegistrationThrottle = ReturnType<typeof registrationThrottle>;
