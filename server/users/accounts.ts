import { v7 as uuidv7 } from 'uuid';
import type { Role } from '../../contract/users.js';
import type { AppContext } from '../context.js';
import { isUniqueViolation } from '../db/errors.js';
import type { User as UserRow } from '../generated/prisma/client.js';
import { AppError } from '../http/errors.js';

export const emailTaken = () => new AppError('email_taken', 'An account with this email already exists');

/** Creates an account; the email arrives normalised by the contract. */
export async function createAccount(
  ctx: AppContext,
  input: { email: string; password: string; name: string; role?: Role },
): Promise<UserRow> {
  const passwordHash = await ctx.passwords.hash(input.password);
  const now = new Date();
  try {
    return await ctx.db.prisma.user.create({
      data: { id: uuidv7(), email: input.email, name: input.name, role: input.role ?? 'user', passwordHash, createdAt: now, updatedAt: now },
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw emailTaken();
    throw error;
  }
}

/**
 * Makes sure the configured administrator exists with the admin role. An existing account with
 * that email is promoted; its password is left as it is.
 */
export async function ensureAdmin(ctx: AppContext, admin: { email: string; password: string; name: string }): Promise<UserRow> {
  const email = admin.email.trim().toLowerCase();
  const existing = await ctx.db.prisma.user.findUnique({ where: { email } });
  if (existing) {
    if (existing.role === 'admin') return existing;
    return ctx.db.prisma.user.update({ where: { id: existing.id }, data: { role: 'admin', updatedAt: new Date() } });
  }
  try {
    return await createAccount(ctx, { email, password: admin.password, name: admin.name, role: 'admin' });
  } catch (error) {
    // Another instance starting at the same moment created it.
    if (error instanceof AppError && error.code === 'email_taken') return ensureAdmin(ctx, admin);
    throw error;
  }
}
