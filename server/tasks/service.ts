import { v7 as uuidv7 } from 'uuid';
import type { Task, TaskCreate, TaskListQuery, TaskPatch, TaskStatus } from '@task-service/client';
import { discardStoredBytes, storageKeysOf } from '../storage/stored-bytes.js';
import type { AppContext } from '../context.js';
import { isMissingRow } from '../db/errors.js';
import type { Prisma } from '../generated/prisma/client.js';
import { inTransaction } from '../db/transactions.js';
import { withinQuota } from '../quotas.js';
import { recordEvent } from '../events/outbox.js';
import { taskChanged, taskDeleted } from '../events/domain-events.js';
import { AppError, invalidField, notFound } from '../http/errors.js';
import { entityTag, ifMatchHolds } from '../http/etags.js';
import { toPage, type ListExchange, type Page } from '../http/pagination.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { taskCursor, taskPageQuery, type TaskSet } from './list-query.js';
import { visibleTask } from './queries.js';
import { readTasks, readVisibleTask } from './read.js';
import { serializeTask, taskInclude, type TaskRow } from './serialize.js';

/** The tasks of `set` (the caller's visibility already decided) matching the query, one page. */
export async function listTasks(ctx: AppContext, set: TaskSet, query: TaskListQuery, http: ListExchange): Promise<Page<Task>> {
  const cursor = ctx.cursors.decode(query.cursor, query.sort);
  const page = await ctx.db.prisma.$queryRaw<{ id: string }[]>(taskPageQuery(set, query, cursor, query.limit + 1));
  const ids = page.map((row) => row.id);
  const rows = await readTasks(ctx, ids);
  const byId = new Map(rows.map((row) => [row.id, row]));
  // A task deleted between the two reads is left out of its page.
  const ordered = ids.flatMap((id) => byId.get(id) ?? []);
  return toPage(ctx.cursors, http, ordered, query.limit, (row) => taskCursor(query.sort, row), serializeTask);
}

/** What GET /tasks lists for the caller: every task for an admin, else those they own or are assigned. */
export const tasksVisibleTo = (principal: Principal): TaskSet =>
  isAdmin(principal) ? { kind: 'all' } : { kind: 'either', userId: principal.userId };

/** The id and owner of a task the caller may see, or 404: for checks that need no more. */
export async function findVisibleTaskRef(ctx: AppContext, principal: Principal, taskId: string): Promise<{ id: string; ownerId: string; version: number }> {
  const row = await ctx.db.prisma.task.findFirst({ where: visibleTask(principal, taskId), select: { id: true, ownerId: true, version: true } });
  if (!row) throw notFound('task');
  return row;
}

/** A task the caller may see, or 404 (never 403: another user's task does not exist for them). */
export async function findVisibleTask(ctx: AppContext, principal: Principal, taskId: string): Promise<TaskRow> {
  const row = await readVisibleTask(ctx, principal, taskId);
  if (!row) throw notFound('task');
  return row;
}

/** The assignee or a tag was deleted between the check and the write. */
const referenceGone = () => invalidField('body', 'unknown_reference', 'A user or tag this task refers to no longer exists');

const staleVersion = (version: number) =>
  new AppError('precondition_failed', `The task is at version ${version}`, { headers: { ETag: entityTag(version) } });

async function assertUserExists(db: Prisma.TransactionClient, userId: string | null | undefined): Promise<void> {
  if (!userId) return;
  const user = await db.user.findUnique({ where: { id: userId }, select: { id: true } });
  if (!user) throw invalidField('body.assigneeId', 'unknown_user', 'No user has this id');
}

/** completedAt follows status: set on entering done, kept while done, cleared on leaving it. */
function completion(previous: { status: TaskStatus; completedAt: Date | null } | undefined, next: TaskStatus, now: Date): Date | null {
  if (next !== 'done') return null;
  return previous?.status === 'done' ? previous.completedAt : now;
}

export async function createTask(ctx: AppContext, principal: Principal, input: TaskCreate): Promise<TaskRow> {
  await assertUserExists(ctx.db.prisma, input.assigneeId);
  const tagIds = [...new Set(input.tagIds)];
  if (tagIds.length > 0) {
    const owned = await ctx.db.prisma.tag.count({ where: { id: { in: tagIds }, ownerId: principal.userId } });
    if (owned !== tagIds.length) throw invalidField('body.tagIds', 'unknown_tag', 'Every tag must be one of your own tags');
  }
  const now = new Date();
  try {
    return await withinQuota(ctx, principal, 'tasks', async (tx) => {
      const task = await tx.task.create({
        data: {
          id: uuidv7(),
          ownerId: principal.userId,
          assigneeId: input.assigneeId,
          title: input.title,
          description: input.description,
          status: input.status,
          priority: input.priority,
          dueAt: input.dueAt === null ? null : new Date(input.dueAt),
          completedAt: completion(undefined, input.status, now),
          createdAt: now,
          updatedAt: now,
          tags: { create: tagIds.map((tagId) => ({ tagId, createdAt: now })) },
        },
        include: taskInclude,
      });
      await recordEvent(tx, principal.userId, taskChanged('task.created', task));
      return task;
    });
  } catch (error) {
    throw isMissingRow(error) ? referenceGone() : error;
  }
}

const sameInstant = (a: Date | null, b: string | null) => (a === null || b === null ? a === b : a.getTime() === new Date(b).getTime());

/** Whether applying `change` alters the task: a no-op write keeps the version. */
function changesTask(current: TaskRow, change: TaskPatch): boolean {
  return (
    (change.title !== undefined && change.title !== current.title) ||
    (change.description !== undefined && change.description !== current.description) ||
    (change.status !== undefined && change.status !== current.status) ||
    (change.priority !== undefined && change.priority !== current.priority) ||
    (change.assigneeId !== undefined && change.assigneeId !== current.assigneeId) ||
    (change.dueAt !== undefined && !sameInstant(current.dueAt, change.dueAt))
  );
}

/**
 * Locks a task's row until the transaction ends (`forDelete`: against every other lock, else against
 * other writers only, so links and uploads still reference it), then reads it as the caller may see it.
 */
async function lockVisibleTask(tx: Prisma.TransactionClient, principal: Principal, taskId: string, { forDelete }: { forDelete: boolean }): Promise<TaskRow> {
  if (forDelete) await tx.$queryRaw`SELECT id FROM tasks WHERE id = ${taskId}::uuid FOR UPDATE`;
  else await tx.$queryRaw`SELECT id FROM tasks WHERE id = ${taskId}::uuid FOR NO KEY UPDATE`;
  const row = await tx.task.findFirst({ where: visibleTask(principal, taskId), include: taskInclude });
  if (!row) throw notFound('task');
  return row;
}

/** API.md: only the owner or an admin reassigns a task; its assignee may only hand it back (null). */
function assertMayReassign(principal: Principal, task: TaskRow, assigneeId: string | null): void {
  if (isAdmin(principal) || task.ownerId === principal.userId) return;
  if (assigneeId === null && task.assigneeId === principal.userId) return;
  throw new AppError('forbidden', 'Only the owner of a task or an admin may change its assignee; the assignee may only set it to null');
}

/**
 * Applies a change to a visible task with its row locked, so concurrent changes apply one after the
 * other and none is lost; only If-Match can refuse one (412). Only the fields sent are written.
 */
export async function changeTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  ifMatch: string | undefined,
  change: TaskPatch,
): Promise<TaskRow> {
  try {
    return await inTransaction(ctx.db.prisma, async (tx) => {
      const current = await lockVisibleTask(tx, principal, taskId, { forDelete: false });
      const reassigns = change.assigneeId !== undefined && change.assigneeId !== current.assigneeId;
      if (reassigns) assertMayReassign(principal, current, change.assigneeId ?? null);
      if (ifMatchHolds(ifMatch, entityTag(current.version)) === false) throw staleVersion(current.version);
      if (!changesTask(current, change)) return current;
      if (reassigns) await assertUserExists(tx, change.assigneeId);
      const now = new Date();
      const status = change.status ?? current.status;
      // Read back without the visibility rule: an assignee who just handed the task back made a
      // change that took, even though they no longer see the task.
      const updated = await tx.task.update({
        where: { id: taskId },
        data: {
          ...(change.title !== undefined && { title: change.title }),
          ...(change.description !== undefined && { description: change.description }),
          ...(change.priority !== undefined && { priority: change.priority }),
          ...(change.assigneeId !== undefined && { assigneeId: change.assigneeId }),
          ...(change.dueAt !== undefined && { dueAt: change.dueAt === null ? null : new Date(change.dueAt) }),
          status,
          completedAt: completion(current, status, now),
          version: { increment: 1 },
          updatedAt: now,
        },
        include: taskInclude,
      });
      await recordEvent(tx, principal.userId, taskChanged('task.updated', updated, current.assigneeId));
      return updated;
    });
  } catch (error) {
    throw isMissingRow(error) ? referenceGone() : error;
  }
}

/** Owner or admin. Of concurrent deletes one succeeds; the others find no task (404), whatever their If-Match. */
export async function deleteTask(ctx: AppContext, principal: Principal, taskId: string, ifMatch: string | undefined): Promise<void> {
  const storageKeys = await inTransaction(ctx.db.prisma, async (tx) => {
    const task = await lockVisibleTask(tx, principal, taskId, { forDelete: true });
    if (task.ownerId !== principal.userId && !isAdmin(principal)) {
      throw new AppError('forbidden', 'Only the owner of a task or an admin may delete it');
    }
    if (ifMatchHolds(ifMatch, entityTag(task.version)) === false) throw staleVersion(task.version);
    // The lock keeps uploads out, so these are all its attachments; the cascade takes their rows.
    const keys = await storageKeysOf(tx, { taskId });
    await tx.task.delete({ where: { id: taskId } });
    await recordEvent(tx, principal.userId, taskDeleted(taskId, task));
    return keys;
  });
  await discardStoredBytes(ctx, storageKeys);
}
