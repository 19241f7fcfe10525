import type { AppContext } from '../context.js';
import { isMissingRow } from '../db/errors.js';
import { recordTaskUpdates } from '../events/domain-events.js';
import { recordingEvents } from '../events/signal.js';
import { notFound } from '../http/errors.js';
import type { Principal } from '../http/principal.js';
import { findVisibleTaskRef } from '../tasks/service.js';
import { touchTasks } from '../tasks/versions.js';
import { tagsByName } from './queries.js';
import type { TagRow } from './serialize.js';

export async function listTaskTags(ctx: AppContext, principal: Principal, taskId: string): Promise<TagRow[]> {
  const task = await findVisibleTaskRef(ctx, principal, taskId);
  return ctx.db.prisma.tag.findMany({ where: { tasks: { some: { taskId: task.id } } }, orderBy: tagsByName });
}

/** Links one of the task owner's tags to a task; `created` is false when it already was linked. */
export async function addTagToTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  tagId: string,
): Promise<{ tag: TagRow; created: boolean }> {
  const task = await findVisibleTaskRef(ctx, principal, taskId);
  // Even an admin may only use the owner's tags: a task never carries another user's tag.
  const tag = await ctx.db.prisma.tag.findFirst({ where: { id: tagId, ownerId: task.ownerId } });
  if (!tag) throw notFound('tag');
  try {
    const created = await recordingEvents(ctx, async (tx) => {
      // skipDuplicates: a concurrent add of the same tag finds the link there and answers 200.
      const { count } = await tx.taskTag.createMany({ data: [{ taskId: task.id, tagId: tag.id, createdAt: new Date() }], skipDuplicates: true });
      if (count === 0) return false;
      await recordTaskUpdates(tx, principal.userId, await touchTasks(tx, { id: task.id }));
      return true;
    });
    return { tag, created };
  } catch (error) {
    // The task or the tag was deleted meanwhile.
    if (isMissingRow(error)) throw notFound('task or tag');
    throw error;
  }
}

export async function removeTagFromTask(ctx: AppContext, principal: Principal, taskId: string, tagId: string): Promise<void> {
  const task = await findVisibleTaskRef(ctx, principal, taskId);
  try {
    await recordingEvents(ctx, async (tx) => {
      const { count } = await tx.taskTag.deleteMany({ where: { taskId: task.id, tagId } });
      if (count === 0) throw notFound('tag on this task');
      await recordTaskUpdates(tx, principal.userId, await touchTasks(tx, { id: task.id }));
    });
  } catch (error) {
    if (isMissingRow(error)) throw notFound('task');
    throw error;
  }
}
