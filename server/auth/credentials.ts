import type { AppContext } from '../context.js';

/**
 * Checks a password under the login throttle: 429 once the account or the client address has used
 * up its failures; a failure counts against both, a success clears the account's count and gives
 * the address its attempt back. Without a password hash (no such account) it spends the time of a
 * verification and fails, so an unknown email cannot be told from a wrong password.
 */
export async function passwordAccepted(
  ctx: AppContext,
  attempt: { email: string; passwordHash: string | undefined; password: string; address: string; deviceId?: string },
): Promise<boolean> {
  const { email, passwordHash, password, address, deviceId } = attempt;
  await ctx.loginThrottle.begin(email, address, deviceId);
  const valid = passwordHash ? await ctx.passwords.verify(passwordHash, password) : (await ctx.passwords.burn(password), false);
  if (valid) await ctx.loginThrottle.succeeded(email, address, deviceId);
  return valid;
}
