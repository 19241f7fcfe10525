import { v7 as uuidv7 } from 'uuid';
import type { Task, TaskCreate, TaskListQuery, TaskPatch, TaskStatus } from '../../contract/tasks.js';
import { discardStoredBytes, storageKeysOf } from '../attachments/stored-bytes.js';
import type { AppContext } from '../context.js';
import { isMissingRow } from '../db/errors.js';
import { recordEvent } from '../events/outbox.js';
import { taskChanged, taskDeleted } from '../events/domain-events.js';
import { AppError, invalidField, notFound } from '../http/errors.js';
import { entityTag, ifMatchHolds } from '../http/etags.js';
import { decodeCursor, toPage, type ListExchange, type Page } from '../http/pagination.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { taskCursor, taskPageQuery, type TaskSet } from './list-query.js';
import { visibleTask } from './queries.js';
import { serializeTask, taskInclude, type TaskRow } from './serialize.js';

/** The tasks of `set` (the caller's visibility already decided) matching the query, one page. */
export async function listTasks(ctx: AppContext, set: TaskSet, query: TaskListQuery, http: ListExchange): Promise<Page<Task>> {
  const cursor = decodeCursor(query.cursor, query.sort);
  const page = await ctx.db.prisma.$queryRaw<{ id: string }[]>(taskPageQuery(set, query, cursor, query.limit + 1));
  const ids = page.map((row) => row.id);
  const rows = await ctx.db.prisma.task.findMany({ where: { id: { in: ids } }, include: taskInclude });
  const byId = new Map(rows.map((row) => [row.id, row]));
  // A task deleted between the two reads is left out of its page.
  const ordered = ids.flatMap((id) => byId.get(id) ?? []);
  return toPage(http, ordered, query.limit, (row) => taskCursor(query.sort, row), serializeTask);
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
  const row = await ctx.db.prisma.task.findFirst({ where: visibleTask(principal, taskId), include: taskInclude });
  if (!row) throw notFound('task');
  return row;
}

/** The assignee or a tag was deleted between the check and the write. */
const referenceGone = () => invalidField('body', 'unknown_reference', 'A user or tag this task refers to no longer exists');

const staleVersion = (version: number) =>
  new AppError('precondition_failed', `The task is at version ${version}`, { headers: { ETag: entityTag(version) } });

/** A concurrent change won the compare-and-set. */
const changedMeanwhile = () => new AppError('precondition_failed', 'The task changed while this request was applied');

async function assertUserExists(ctx: AppContext, userId: string | null | undefined): Promise<void> {
  if (!userId) return;
  const user = await ctx.db.prisma.user.findUnique({ where: { id: userId }, select: { id: true } });
  if (!user) throw invalidField('body.assigneeId', 'unknown_user', 'No user has this id');
}

/** completedAt follows status: set on entering done, kept while done, cleared on leaving it. */
function completion(previous: { status: TaskStatus; completedAt: Date | null } | undefined, next: TaskStatus, now: Date): Date | null {
  if (next !== 'done') return null;
  return previous?.status === 'done' ? previous.completedAt : now;
}

export async function createTask(ctx: AppContext, principal: Principal, input: TaskCreate): Promise<TaskRow> {
  await assertUserExists(ctx, input.assigneeId);
  const tagIds = [...new Set(input.tagIds)];
  if (tagIds.length > 0) {
    const owned = await ctx.db.prisma.tag.count({ where: { id: { in: tagIds }, ownerId: principal.userId } });
    if (owned !== tagIds.length) throw invalidField('body.tagIds', 'unknown_tag', 'Every tag must be one of your own tags');
  }
  const now = new Date();
  try {
    return await ctx.db.prisma.$transaction(async (tx) => {
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
 * Applies a change to a visible task as one compare-and-set on its version, so that a concurrent
 * change is never lost: with If-Match a stale version is 412, without it the write retries.
 */
export async function changeTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  ifMatch: string | undefined,
  change: TaskPatch,
): Promise<TaskRow> {
  if (change.assigneeId !== undefined) await assertUserExists(ctx, change.assigneeId);
  for (let attempt = 0; ; attempt++) {
    const current = await findVisibleTask(ctx, principal, taskId);
    if (ifMatchHolds(ifMatch, entityTag(current.version)) === false) throw staleVersion(current.version);
    if (!changesTask(current, change)) return current;
    const now = new Date();
    const status = change.status ?? current.status;
    const updated = await ctx.db.prisma.$transaction(async (tx) => {
      const { count } = await tx.task.updateMany({
        where: { id: taskId, version: current.version },
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
      }).catch((error: unknown) => {
        throw isMissingRow(error) ? referenceGone() : error;
      });
      if (count !== 1) return undefined;
      // Read back without the visibility rule: an assignee who just unassigned themselves made a
      // change that took, even though they no longer see the task.
      const row = await tx.task.findUnique({ where: { id: taskId }, include: taskInclude });
      if (!row) throw notFound('task');
      await recordEvent(tx, principal.userId, taskChanged('task.updated', row, current.assigneeId));
      return row;
    });
    if (updated) return updated;
    if (ifMatch !== undefined || attempt >= 5) throw changedMeanwhile();
  }
}

export async function deleteTask(ctx: AppContext, principal: Principal, taskId: string, ifMatch: string | undefined): Promise<void> {
  const task = await findVisibleTaskRef(ctx, principal, taskId);
  if (task.ownerId !== principal.userId && !isAdmin(principal)) {
    throw new AppError('forbidden', 'Only the owner of a task or an admin may delete it');
  }
  if (ifMatchHolds(ifMatch, entityTag(task.version)) === false) throw staleVersion(task.version);
  // Rows first (the cascade takes the attachments), then their bytes; later uploads are left to the orphan sweep.
  const storageKeys = await storageKeysOf(ctx, { taskId });
  const expectedVersion = ifMatch === undefined ? null : task.version;
  const count = await ctx.db.prisma.$transaction(async (tx) => {
    const gone = await tx.$queryRaw<{ owner_id: string; assignee_id: string | null }[]>`
      DELETE FROM tasks WHERE id = ${taskId}::uuid AND (${expectedVersion}::int IS NULL OR version = ${expectedVersion}::int)
      RETURNING owner_id::text, assignee_id::text`;
    for (const row of gone) await recordEvent(tx, principal.userId, taskDeleted(taskId, { ownerId: row.owner_id, assigneeId: row.assignee_id }));
    return gone.length;
  });
  if (count === 0 && ifMatch !== undefined) throw changedMeanwhile();
  if (count > 0) await discardStoredBytes(ctx, storageKeys);
}
