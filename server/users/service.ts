import type { Role, User, UserListQuery, UserPatch, UserReplace } from '../../contract/users.js';
import { discardStoredBytes, storageKeysOf } from '../attachments/stored-bytes.js';
import { passwordAccepted } from '../auth/credentials.js';
import { revokeOtherSessions } from '../auth/sessions.js';
import type { AppContext } from '../context.js';
import { isUniqueViolation } from '../db/errors.js';
import { attachmentDeleted, recordTaskUpdates, taskDeleted, tagDeleted, userDeleted, userUpdated } from '../events/domain-events.js';
import { recordEvent } from '../events/outbox.js';
import type { Prisma, User as UserRow } from '../generated/prisma/client.js';
import { AppError, invalidField, notFound } from '../http/errors.js';
import { createdAfter, creationCursor, toPage, type ListExchange, type Page } from '../http/pagination.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { touchTasks } from '../tasks/versions.js';
import { emailTaken } from './accounts.js';
import { userFilters } from './queries.js';
import { serializeUser } from './serialize.js';

/** Oldest first; admins only. */
export async function listUsers(ctx: AppContext, principal: Principal, query: UserListQuery, http: ListExchange): Promise<Page<User>> {
  requireAdmin(principal, 'list users');
  const rows = await ctx.db.prisma.user.findMany({
    where: { AND: [...userFilters(query), ...createdAfter(query.cursor)] },
    orderBy: { id: 'asc' },
    take: query.limit + 1,
  });
  return toPage(http, rows, query.limit, creationCursor, serializeUser);
}

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

// API.md: role is a server-owned field for non-admins, rejected (400), never bound.
const roleNotSettable = () => invalidField('body.role', 'admin_only', 'Only an admin may set role');

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

/** Whether `change` alters the user: a no-op write keeps updatedAt. */
const changesUser = (user: UserRow, change: ProfileChange): boolean =>
  (change.email !== undefined && change.email !== user.email) ||
  (change.name !== undefined && change.name !== user.name) ||
  (change.role !== undefined && change.role !== user.role) ||
  change.passwordHash !== undefined;

async function applyProfileChange(ctx: AppContext, principal: Principal, user: UserRow, change: ProfileChange): Promise<UserRow> {
  if (!changesUser(user, change)) return user;
  const data = { ...change, updatedAt: new Date() };
  const update = async (tx: Prisma.TransactionClient) => {
    const updated = await tx.user.update({ where: { id: user.id }, data });
    await recordEvent(tx, principal.userId, userUpdated(updated));
    return updated;
  };
  try {
    // Only a demotion needs the admins locked: it is the one change that can remove the last admin.
    if (user.role === 'admin' && change.role === 'user') {
      return await withAdminsLocked(ctx, async (tx, adminCount) => {
        if (adminCount <= 1) throw lastAdmin();
        return update(tx);
      });
    }
    return await ctx.db.prisma.$transaction(update);
  } catch (error) {
    if (isUniqueViolation(error)) throw emailTaken();
    throw error;
  }
}

export async function replaceUser(ctx: AppContext, principal: Principal, userId: string, body: UserReplace): Promise<UserRow> {
  const user = await findVisibleUser(ctx, principal, userId);
  if (body.role !== undefined && !isAdmin(principal)) throw roleNotSettable();
  return applyProfileChange(ctx, principal, user, { email: body.email, name: body.name, ...(body.role && { role: body.role }) });
}

const CURRENT_PASSWORD = 'body.currentPassword';

/** Wrong guesses count against the account and address exactly as failed logins do. */
async function proveCurrentPassword(ctx: AppContext, user: UserRow, currentPassword: string | undefined, address: string): Promise<void> {
  if (currentPassword === undefined) throw invalidField(CURRENT_PASSWORD, 'required', 'Send currentPassword to change your own password');
  if (!(await passwordAccepted(ctx, { email: user.email, passwordHash: user.passwordHash, password: currentPassword, address }))) {
    throw invalidField(CURRENT_PASSWORD, 'invalid_current_password', 'The current password is wrong');
  }
}

/** `address` is the client's, for throttling guesses of the current password as login does. */
export async function patchUser(ctx: AppContext, principal: Principal, userId: string, body: UserPatch, address: string): Promise<UserRow> {
  const user = await findVisibleUser(ctx, principal, userId);
  if (body.role !== undefined && !isAdmin(principal)) throw roleNotSettable();
  const change: ProfileChange = { email: body.email, name: body.name, role: body.role };
  if (body.password !== undefined) {
    // Users changing their own password prove they know the current one; admins resetting
    // someone else's do not.
    if (user.id === principal.userId) await proveCurrentPassword(ctx, user, body.currentPassword, address);
    change.passwordHash = await ctx.passwords.hash(body.password);
  }
  const updated = await applyProfileChange(ctx, principal, user, change);
  if (body.password !== undefined) {
    await revokeOtherSessions(ctx, user.id, user.id === principal.userId ? principal.sessionId : undefined);
  }
  return updated;
}

/**
 * Deletes a user; their tasks, tags, sessions and attachments (on their tasks or uploaded by them)
 * go with them by foreign key cascades, then the attachments' stored bytes are discarded.
 */
export async function deleteUser(ctx: AppContext, principal: Principal, userId: string): Promise<void> {
  const user = await findVisibleUser(ctx, principal, userId);
  // Bytes of attachments added after this read are left to the orphan sweep.
  const storageKeys = await storageKeysOf(ctx, { OR: [{ task: { ownerId: user.id } }, { uploadedBy: user.id }] });
  await withAdminsLocked(ctx, async (tx, adminCount) => {
    if (user.role === 'admin' && adminCount <= 1) throw lastAdmin();
    // Tombstones for what goes with the account, so that assignees and admins learn of it.
    const tasks = await tx.task.findMany({ where: { ownerId: user.id }, select: { id: true, ownerId: true, assigneeId: true } });
    const tags = await tx.tag.findMany({ where: { ownerId: user.id }, select: { id: true, ownerId: true } });
    const uploads = await tx.attachment.findMany({
      where: { uploadedBy: user.id, task: { ownerId: { not: user.id } } },
      select: { id: true, taskId: true, task: { select: { ownerId: true, assigneeId: true } } },
    });
    // Others' tasks lose this assignee or this uploader's attachments.
    const touched = await touchTasks(tx, { ownerId: { not: user.id }, OR: [{ assigneeId: user.id }, { attachments: { some: { uploadedBy: user.id } } }] });
    await tx.user.delete({ where: { id: user.id } });
    await recordTaskUpdates(tx, principal.userId, touched, [
      userDeleted(user.id),
      ...tasks.map((task) => taskDeleted(task.id, task)),
      ...tags.map(tagDeleted),
      ...uploads.map((upload) => attachmentDeleted(upload, upload.task)),
    ]);
  });
  await discardStoredBytes(ctx, storageKeys);
}
