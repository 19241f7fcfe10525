import type { Role, User, UserListQuery, UserPatch, UserReplace } from '@task-service/client';
import { sql } from 'kysely';
import { recordingEvents } from '../events/signal.js';
import { discardStoredBytes, storageKeysOfUser } from '../storage/stored-bytes.js';
import { revokeUserGrants } from '../tokens/app-grants.js';
import { leaveProjectsOf } from '../projects/leave.js';
import type { AppContext } from '../context.js';
import { isUniqueViolation } from '../db/errors.js';
import { rawQuery, tables } from '../db/query.js';
import type { SqlSession } from '../db/sql.js';
import { attachmentDeleted, recordTaskUpdates, taskDeleted } from '../tasks/events.js';
import { tagDeleted } from '../tags/events.js';
import { userDeleted, userUpdated } from './events.js';
import { EVENT_WRITES, PLACE_NEW_EVENTS, recordEvent } from '../events/outbox.js';
import { AppError, invalidField, notFound } from '../http/errors.js';
import { createdAfterId, creationCursor, toPage, type ListExchange, type Page } from '../http/pagination.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { goneDeltas, ripple, rippleEvents } from '../tasks/hierarchy.js';
import { settleTaskStubs } from '../tasks/change-events.js';
import { touchTasks } from '../tasks/versions.js';
import { accountColumns, emailTaken, passwordAccepted, type AccountRow } from './accounts.js';
import { filterUsers } from './queries.js';
import { serializeUser, userColumns, type UserRow } from './serialize.js';

/** Oldest first; admins only. */
export async function listUsers(
  ctx: AppContext,
  principal: Principal,
  query: UserListQuery,
  http: ListExchange,
): Promise<Page<User>> {
  requireAdmin(principal, 'list users');
  const after = createdAfterId(ctx.cursors, query.cursor);
  const users = tables.selectFrom('users').select(userColumns);
  const rows = await ctx.db.sql.all(
    filterUsers(after ? users.where('users.id', '>', after) : users, query)
      .orderBy('users.id')
      .limit(query.limit + 1),
  );
  return toPage(ctx.cursors, http, rows, query.limit, creationCursor, serializeUser);
}

/** A user the caller may see: themself, or anyone for an admin. Others are 404. */
export async function findVisibleUser(ctx: AppContext, principal: Principal, userId: string): Promise<UserRow> {
  if (userId !== principal.userId && !isAdmin(principal)) throw notFound('user');
  const user = await ctx.db.sql.first(tables.selectFrom('users').select(userColumns).where('users.id', '=', userId));
  if (!user) throw notFound('user');
  return user;
}

/** findVisibleUser with the password's hash, for a change that checks the current password. */
async function findVisibleAccount(ctx: AppContext, principal: Principal, userId: string): Promise<AccountRow> {
  if (userId !== principal.userId && !isAdmin(principal)) throw notFound('user');
  const account = await ctx.db.sql.first(
    tables.selectFrom('users').select(accountColumns).where('users.id', '=', userId),
  );
  if (!account) throw notFound('user');
  return account;
}

export function requireAdmin(principal: Principal, what: string): void {
  if (!isAdmin(principal)) throw new AppError('forbidden', `Only an admin may ${what}`);
}

// role is a server-owned field for non-admins, rejected (400), never bound.
const roleNotSettable = () => invalidField('body.role', 'admin_only', 'Only an admin may set role');

const lastAdmin = () => new AppError('last_admin', 'The service must keep at least one admin');

// Every transaction that takes the admin role from someone (a demotion, a deletion) holds this lock
// first, so two of them never both count the other's admin; promotions need not wait.
const ADMIN_REMOVAL_LOCK = 7_202_611_250_001n;

/** Locks the user's row until the transaction ends and reads it as it now is; 404 when gone. */
async function lockUser(tx: SqlSession, userId: string): Promise<UserRow> {
  // FOR UPDATE answers the row as the transaction that held the lock left it.
  const user = await tx.first(
    tables.selectFrom('users').select(userColumns).where('users.id', '=', userId).forUpdate(),
  );
  if (!user) throw notFound('user');
  return user;
}

/**
 * Called with the admin's own row locked, before it stops being an admin: 409 unless another admin
 * remains. Ordinary users' changes never come here, so they never wait for the admins.
 */
async function assertAnotherAdminRemains(tx: SqlSession, adminId: string): Promise<void> {
  await tx.all(
    tables.selectNoFrom(sql<void>`pg_advisory_xact_lock(${String(ADMIN_REMOVAL_LOCK)}::bigint)`.as('locked')),
  );
  const other = await tx.first(
    tables.selectFrom('users').select('users.id').where('users.role', '=', 'admin').where('users.id', '<>', adminId),
  );
  if (!other) throw lastAdmin();
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

/**
 * A personal access token may change a profile, never what signs in to it: the password, the email
 * (whoever holds the email can take the account over), or the account's existence. Those need a login.
 */
const needsLogin = (what: string) =>
  new AppError('forbidden', `A personal access token may not ${what}: use an access token from a login`);

/**
 * Applies the change to the user's row as it is once locked; a demotion of the last admin is 409.
 * `revokeTokens` deletes the user's personal access tokens in the same transaction.
 */
async function applyProfileChange(
  ctx: AppContext,
  principal: Principal,
  userId: string,
  change: ProfileChange,
  { revokeTokens = false } = {},
): Promise<UserRow> {
  try {
    return await recordingEvents(ctx, async (tx) => {
      const user = await lockUser(tx, userId);
      // Decided on the locked row, so a token's write never puts back an email a login just changed.
      if (principal.token && change.email !== undefined && change.email !== user.email)
        throw needsLogin('change the email');
      if (!changesUser(user, change)) return user;
      if (user.role === 'admin' && change.role === 'user') await assertAnotherAdminRemains(tx, user.id);
      const updated = await tx.first(
        tables
          .updateTable('users')
          .set({
            email: change.email,
            name: change.name,
            role: change.role,
            password_hash: change.passwordHash,
            updated_at: new Date(),
          })
          .where('users.id', '=', user.id)
          .returning(userColumns),
      );
      if (!updated) throw notFound('user'); // locked above: it cannot have gone
      if (revokeTokens)
        await tx.write(
          tables.deleteFrom('personal_access_tokens').where('personal_access_tokens.user_id', '=', user.id),
        );
      await recordEvent(tx, principal.userId, userUpdated(updated));
      return updated;
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw emailTaken();
    throw error;
  }
}

export async function replaceUser(
  ctx: AppContext,
  principal: Principal,
  userId: string,
  body: UserReplace,
): Promise<UserRow> {
  const user = await findVisibleUser(ctx, principal, userId);
  if (body.role !== undefined && !isAdmin(principal)) throw roleNotSettable();
  return applyProfileChange(ctx, principal, user.id, {
    email: body.email,
    name: body.name,
    ...(body.role && { role: body.role }),
  });
}

const CURRENT_PASSWORD = 'body.currentPassword';

/** Wrong guesses count against the account and address exactly as failed logins do. */
async function proveCurrentPassword(
  ctx: AppContext,
  user: AccountRow,
  currentPassword: string | undefined,
  address: string,
): Promise<void> {
  if (currentPassword === undefined)
    throw invalidField(CURRENT_PASSWORD, 'required', 'Send currentPassword to change your own password');
  if (!(await passwordAccepted(ctx, user, currentPassword, address))) {
    throw invalidField(CURRENT_PASSWORD, 'invalid_current_password', 'The current password is wrong');
  }
}

/** Revokes every live session of the user except `keepSessionId`. */
async function revokeOtherSessions(ctx: AppContext, userId: string, keepSessionId: string | undefined): Promise<void> {
  const live = tables
    .updateTable('sessions')
    .set({ revoked_at: new Date() })
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null);
  await ctx.db.sql.write(keepSessionId ? live.where('id', '<>', keepSessionId) : live);
}

/** `address` is the client's, for throttling guesses of the current password as login does. */
export async function patchUser(
  ctx: AppContext,
  principal: Principal,
  userId: string,
  body: UserPatch,
  address: string,
): Promise<UserRow> {
  const user = await findVisibleAccount(ctx, principal, userId);
  if (body.role !== undefined && !isAdmin(principal)) throw roleNotSettable();
  if (body.password !== undefined && principal.token) throw needsLogin('change a password');
  const change: ProfileChange = { email: body.email, name: body.name, role: body.role };
  const ownPassword = user.id === principal.userId;
  if (body.password !== undefined) {
    // Users changing their own password prove they know the current one; admins resetting
    // someone else's do not.
    if (ownPassword) await proveCurrentPassword(ctx, user, body.currentPassword, address);
    change.passwordHash = await ctx.passwords.hash(body.password);
  }
  // Someone else setting the password takes the account back from whoever held it, tokens included;
  // users changing their own keep their tokens (scripts go on working), as on GitHub.
  const updated = await applyProfileChange(ctx, principal, user.id, change, {
    revokeTokens: body.password !== undefined && !ownPassword,
  });
  if (body.password !== undefined) {
    await revokeOtherSessions(ctx, user.id, ownPassword ? principal.sessionId : undefined);
    await revokeUserGrants(ctx, user.id);
  }
  return updated;
}

/**
 * What the tasks the user still owns (their personal ones, once their project work is handed over)
 * leave behind when they go with the account by cascade: the tasks of others they blocked lose them,
 * as when each is deleted alone, each unblocked one with a new version and its `task.updated`
 * (server/tasks/hierarchy.ts). Their rows are locked first, before the statement's snapshot, so no
 * relation is made on one meanwhile and left uncounted.
 */
async function releaseTasksOf(tx: SqlSession, userId: string, actorId: string): Promise<void> {
  await tx.all(
    tables.selectFrom('tasks').select('tasks.id').where('tasks.owner_id', '=', userId).orderBy('tasks.id').forUpdate(),
  );
  await tx.exec('SAVEPOINT release_tasks');
  await tx.all(
    rawQuery(sql`
      WITH args AS (SELECT ${actorId}::uuid AS me, ${new Date()}::timestamptz AS now),
      gone AS (SELECT t.id, t.parent_id, t.status FROM tasks t WHERE t.owner_id = ${userId}::uuid),
      deltas AS (${sql.raw(goneDeltas('gone'))}),
      ${sql.raw(ripple('(SELECT now FROM args)'))},
      new_events AS (${sql.raw(rippleEvents('(SELECT me FROM args)'))}),
      ${sql.raw(EVENT_WRITES)}
      SELECT count(*) FROM ripple`),
  );
  await tx.rows(settleTaskStubs.text, settleTaskStubs.values);
  await tx.exec(PLACE_NEW_EVENTS);
  await tx.exec('RELEASE SAVEPOINT release_tasks');
}

/**
 * Deletes a user; their tasks, tags, sessions and attachments (on their tasks or uploaded by them)
 * go with them by foreign key cascades, then the attachments' stored bytes are discarded. Their
 * tasks and tags in projects stay, handed over first (server/projects/leave.ts).
 */
export async function deleteUser(ctx: AppContext, principal: Principal, userId: string): Promise<void> {
  await findVisibleUser(ctx, principal, userId);
  if (principal.token) throw needsLogin('delete an account');
  const storageKeys = await recordingEvents(ctx, async (tx) => {
    const user = await lockUser(tx, userId);
    if (user.role === 'admin') await assertAnotherAdminRemains(tx, user.id);
    // Their projects pass on to another member, or go when nobody is left (with their bytes).
    const projectKeys = await leaveProjectsOf(tx, user.id, principal.userId);
    await releaseTasksOf(tx, user.id, principal.userId);
    // Bytes of attachments added after this read are left to the orphan sweep.
    const doomed = [...projectKeys, ...(await storageKeysOfUser(tx, user.id))];
    // Tombstones for what goes with the account, so that assignees and admins learn of it. The
    // user's row lock keeps new tasks, tags and uploads referencing it out until this commits.
    const tasks = await tx.all(
      tables
        .selectFrom('tasks')
        .select(['tasks.id', 'tasks.owner_id as ownerId', 'tasks.assignee_id as assigneeId'])
        .where('tasks.owner_id', '=', user.id),
    );
    const tags = await tx.all(
      tables.selectFrom('tags').select(['tags.id', 'tags.owner_id as ownerId']).where('tags.owner_id', '=', user.id),
    );
    const uploads = await tx.all(
      tables
        .selectFrom('attachments')
        .innerJoin('tasks', 'tasks.id', 'attachments.task_id')
        .select([
          'attachments.id',
          'attachments.task_id as taskId',
          'tasks.owner_id as ownerId',
          'tasks.assignee_id as assigneeId',
          'tasks.project_id as projectId',
        ])
        .where('attachments.uploaded_by', '=', user.id)
        .where('tasks.owner_id', '<>', user.id),
    );
    // Others' tasks lose this assignee or this uploader's attachments.
    const touched = await touchTasks(tx, (eb) =>
      eb.and([
        eb('tasks.owner_id', '<>', user.id),
        eb.or([
          eb('tasks.assignee_id', '=', user.id),
          eb.exists(
            eb
              .selectFrom('attachments')
              .select('attachments.id')
              .whereRef('attachments.task_id', '=', 'tasks.id')
              .where('attachments.uploaded_by', '=', user.id),
          ),
        ]),
      ]),
    );
    await tx.write(tables.deleteFrom('users').where('users.id', '=', user.id));
    await recordTaskUpdates(tx, principal.userId, touched, [
      userDeleted(user.id),
      ...tasks.map((task) => taskDeleted(task.id, task)),
      ...tags.map(tagDeleted),
      ...uploads.map((upload) => attachmentDeleted(upload, upload)),
    ]);
    return doomed;
  });
  await discardStoredBytes(ctx, storageKeys);
}
