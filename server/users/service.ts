import type { Role, UserPatch, UserReplace } from '../../contract/users.js';
import { revokeOtherSessions } from '../auth/sessions.js';
import type { AppContext } from '../context.js';
import { isUniqueViolation } from '../db/errors.js';
import type { Prisma, User as UserRow } from '../generated/prisma/client.js';
import { AppError, notFound } from '../http/errors.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { emailTaken } from './accounts.js';

/** A user the caller may see: themself, or anyone for an admin. Others are 404. */
export async function findVisibleUser(ctx: AppContext, principal: Principal, userId: string): Promise<UserRow> {
  if (userId !== principal.userId && !isAdmin(principal)) throw notFound('user');
  const user = await ctx.db.prisma.user.findUnique({ where: { id: userId } });
  if (!user) throw notFound('user');
  return user;
}

export function requireAdmin(principal: Principal, what: string): void {
  if (!isAdmin(principal)) throw new AppError('forbidden', `Only an admin may ${what}`);
}

const lastAdmin = () => new AppError('last_admin', 'The service must keep at least one admin');

/**
 * Runs `work` while holding a lock on every admin row, so that two requests cannot both remove
 * one of the last two admins.
 */
async function withAdminsLocked<T>(ctx: AppContext, work: (tx: Prisma.TransactionClient, adminCount: number) => Promise<T>): Promise<T> {
  return ctx.db.prisma.$transaction(async (tx) => {
    const admins = await tx.$queryRaw<{ id: string }[]>`SELECT id FROM users WHERE role = 'admin' FOR UPDATE`;
    return work(tx, admins.length);
  });
}

interface ProfileChange {
  email?: string;
  name?: string;
  role?: Role;
  passwordHash?: string;
}

async function applyProfileChange(ctx: AppContext, user: UserRow, change: ProfileChange): Promise<UserRow> {
  const demotesAdmin = user.role === 'admin' && change.role === 'user';
  try {
    return await withAdminsLocked(ctx, async (tx, adminCount) => {
      if (demotesAdmin && adminCount <= 1) throw lastAdmin();
      return tx.user.update({ where: { id: user.id }, data: { ...change, updatedAt: new Date() } });
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw emailTaken();
    throw error;
  }
}

export async function replaceUser(ctx: AppContext, principal: Principal, userId: string, body: UserReplace): Promise<UserRow> {
  const user = await findVisibleUser(ctx, principal, userId);
  if (body.role !== undefined && body.role !== user.role) requireAdmin(principal, 'change a role');
  return applyProfileChange(ctx, user, { email: body.email, name: body.name, ...(body.role && { role: body.role }) });
}

export async function patchUser(ctx: AppContext, principal: Principal, userId: string, body: UserPatch): Promise<UserRow> {
  const user = await findVisibleUser(ctx, principal, userId);
  if (body.role !== undefined && body.role !== user.role) requireAdmin(principal, 'change a role');
  const change: ProfileChange = { email: body.email, name: body.name, role: body.role };
  if (body.password !== undefined) {
    // Users changing their own password prove they know the current one; admins resetting
    // someone else's do not.
    if (user.id === principal.userId) {
      const valid = body.currentPassword !== undefined && (await ctx.passwords.verify(user.passwordHash, body.currentPassword));
      if (!valid) {
        throw new AppError('validation_failed', 'body.currentPassword: the current password is required and must be right', {
          errors: [{ path: 'body.currentPassword', code: 'invalid_current_password', message: 'The current password is required and must be right' }],
        });
      }
    }
    change.passwordHash = await ctx.passwords.hash(body.password);
  }
  const updated = await applyProfileChange(ctx, user, change);
  if (body.password !== undefined) {
    await revokeOtherSessions(ctx, user.id, user.id === principal.userId ? principal.sessionId : undefined);
  }
  return updated;
}

/** Deletes a user; their tasks, tags, attachments and sessions go with them (foreign key cascades). */
export async function deleteUser(ctx: AppContext, principal: Principal, userId: string): Promise<void> {
  const user = await findVisibleUser(ctx, principal, userId);
  await withAdminsLocked(ctx, async (tx, adminCount) => {
    if (user.role === 'admin' && adminCount <= 1) throw lastAdmin();
    await tx.user.delete({ where: { id: user.id } });
  });
}
