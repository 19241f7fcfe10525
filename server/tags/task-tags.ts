import type { AppContext } from '../context.js';
import { tables } from '../db/query.js';
import { announceEvents } from '../events/signal.js';
import { AppError, invalidField, notFound } from '../http/errors.js';
import type { Principal } from '../http/principal.js';
import { findVisibleTaskRef } from '../tasks/service.js';
import { byName } from '../tasks/serialize.js';
import { tagColumns, type TagRow } from './serialize.js';
import { linkTag, unlinkTag } from './store.js';

const readOnly = () => new AppError('forbidden', "Only an editor or admin of the task's project may change its tags");

export async function listTaskTags(ctx: AppContext, principal: Principal, taskId: string): Promise<TagRow[]> {
  const task = await findVisibleTaskRef(ctx, principal, taskId);
  return ctx.db.sql.all(
    byName(
      tables
        .selectFrom('tags')
        .innerJoin('task_tags', 'task_tags.tag_id', 'tags.id')
        .select(tagColumns)
        .where('task_tags.task_id', '=', task.id),
    ),
  );
}

/** Links one of the task owner's tags to a task in one round trip (store.ts); `created` is false when it already was linked. */
export async function addTagToTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  tagId: string,
): Promise<{ tag: TagRow; created: boolean }> {
  const outcome = await linkTag(ctx, principal, taskId, tagId);
  switch (outcome.kind) {
    case 'no_task':
      throw notFound('task');
    case 'read_only':
      throw readOnly();
    case 'no_tag':
      throw notFound('tag');
    case 'unfit_tag':
      throw invalidField(
        'path.tag_id',
        'unknown_tag',
        "A project task carries only its project's tags, a personal task only its owner's personal tags",
      );
    case 'linked':
      announceEvents(ctx);
      return { tag: outcome.row, created: true };
    case 'already':
      return { tag: outcome.row, created: false };
  }
}

/** Takes a tag off a task in one round trip (store.ts); 404 when the task is not the caller's to see or does not carry it. */
export async function removeTagFromTask(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  tagId: string,
): Promise<void> {
  const outcome = await unlinkTag(ctx, principal, taskId, tagId);
  if (outcome === 'no_task') throw notFound('task');
  if (outcome === 'read_only') throw readOnly();
  if (outcome === 'not_linked') throw notFound('tag on this task');
  announceEvents(ctx);
}
