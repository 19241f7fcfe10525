import type { Relation, RelationCreate, RelationView } from '@task-service/client';
import { MAX_RELATIONS_PER_TASK } from '@task-service/client';
import type { AppContext } from '../context.js';
import { announceEvents } from '../events/signal.js';
import { AppError, invalidField, notFound } from '../http/errors.js';
import type { Principal } from '../http/principal.js';
import { findVisibleTaskRef } from '../tasks/service.js';
import { deleteRelation, insertRelation, readRelations } from './store.js';

const readOnly = () =>
  new AppError(
    'forbidden',
    'Only whoever may change the task (its owner or assignee, an editor or admin of its project) may change its relations',
  );

/** The task's relations as it sees them (404 when the caller does not see the task). */
export async function listRelations(ctx: AppContext, principal: Principal, taskId: string): Promise<Relation[]> {
  await findVisibleTaskRef(ctx, principal, taskId);
  return readRelations(ctx, principal, taskId);
}

/** Relates the task to another in one round trip (store.ts); `created` is false when the relation already was there. */
export async function relateTasks(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  input: RelationCreate,
): Promise<{ relation: Relation; created: boolean }> {
  const outcome = await insertRelation(ctx, principal, taskId, input);
  switch (outcome.kind) {
    case 'not_found':
      throw notFound('task');
    case 'read_only':
      throw readOnly();
    case 'self':
      throw invalidField('body.taskId', 'same_task', 'A task cannot relate to itself');
    case 'unknown_task':
      throw invalidField('body.taskId', 'unknown_task', 'No task you see has this id');
    case 'cycle':
      throw invalidField(
        'body.taskId',
        'blocks_cycle',
        'This task is already blocked, directly or through others, by the task it would block',
      );
    case 'full':
      throw new AppError('conflict', `A task takes part in at most ${MAX_RELATIONS_PER_TASK} relations`);
    case 'created':
      announceEvents(ctx);
      return { relation: { type: input.type, task: outcome.other }, created: true };
    case 'exists':
      return { relation: { type: input.type, task: outcome.other }, created: false };
  }
}

/** Removes a relation named as the task sees it; 404 when the task is not seen or has no such relation. */
export async function unrelateTasks(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  type: RelationView,
  otherId: string,
): Promise<void> {
  const outcome = await deleteRelation(ctx, principal, taskId, type, otherId);
  if (outcome === 'not_found') throw notFound('task');
  if (outcome === 'read_only') throw readOnly();
  if (outcome === 'no_relation') throw notFound('relation');
  announceEvents(ctx);
}
