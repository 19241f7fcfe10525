import type { AuthResult } from '@task-service/client';
import type { AppContext } from '../context.js';
import { AppError } from '../http/errors.js';
import { accountByEmail, passwordMatches, type AccountRow } from '../users/accounts.js';
import { claimedDevice, deviceTokenFor } from '../security/devices.js';
import { newSession } from './sessions.js';
import { NOT_DURABLE } from '../security/throttle.js';

const wrongCredentials = () => new AppError('invalid_credentials', 'The email or the password is wrong');

/**
 * A login under the throttle, in two round trips around the password check: the account and the
 * attempt taken from its budgets together before it, the budgets settled and the session written
 * side by side after it (a login storm is argon2's, not the bookkeeping's). 429 once the account, the
 * client address or the known device has used up its failures; 401 for a wrong email or password,
 * alike: without an account it spends the time of a verification all the same.
 */
export async function logIn(
  ctx: AppContext,
  attempt: { email: string; password: string; address: string; deviceToken: string | undefined },
): Promise<AuthResult & { deviceToken: string }> {
  const claimed = attempt.deviceToken === undefined ? undefined : claimedDevice(ctx.cursors, attempt.deviceToken);
  const { user, taken } = await checkedAccount(ctx, attempt, claimed);
  const session = newSession(ctx, user);
  await Promise.all([
    ctx.db.sql.pipeline({ settle: ctx.loginThrottle.succeeded(taken) }, NOT_DURABLE),
    ctx.db.sql.write(session.insert),
  ]);
  const deviceId = claimed?.account === user.id ? claimed.deviceId : undefined;
  return { ...(await session.answer()), deviceToken: deviceTokenFor(ctx.cursors, user.id, deviceId) };
}

/** The account the email and password name, with the attempt taken from the throttle's budgets (settled by the caller). */
async function checkedAccount(
  ctx: AppContext,
  { email, password, address }: { email: string; password: string; address: string },
  claimed: ReturnType<typeof claimedDevice> | undefined,
) {
  // The throttle's counts need not wait for the disk (throttle.ts); the session does.
  const { account, counted } = await ctx.db.sql.pipeline(
    { account: accountByEmail(email), counted: ctx.loginThrottle.take(email, address, claimed) },
    NOT_DURABLE,
  );
  const [user] = account;
  const taken = await ctx.loginThrottle.admit(counted);
  if (!(await passwordMatches(ctx, user, password)) || !user) throw wrongCredentials();
  return { user, taken };
}

/**
 * A sign-in that opens no session (the OAuth sign-in page): the same throttle, the same answers as
 * a login (429 when a budget is spent, 401 for a wrong email or password alike).
 */
export async function signIn(
  ctx: AppContext,
  attempt: { email: string; password: string; address: string },
): Promise<AccountRow> {
  const { user, taken } = await checkedAccount(ctx, attempt, undefined);
  await ctx.db.sql.pipeline({ settle: ctx.loginThrottle.succeeded(taken) }, NOT_DURABLE);
  return user;
}
