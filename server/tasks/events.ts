import type { SqlSession } from '../db/sql.js';
import type { Task } from '@task-service/client';
import { recordEvents, type OutboxEvent } from '../events/outbox.js';
import { readTasksById } from './store.js';

/** Who may see a task's events: its owner and assignee, and an assignee the change removed. */
interface TaskParties {
  ownerId: string;
  assigneeId: string | null;
}

export const taskChanged = (
  type: 'task.created' | 'task.updated',
  task: Task,
  formerAssigneeId?: string | null,
): OutboxEvent => ({
  type,
  data: { task },
  // A project's task names nobody: its project's members read it (the event's project, outbox.ts).
  audience: task.projectId === null ? [task.ownerId, task.assigneeId, formerAssigneeId] : [],
});

export const taskDeleted = (taskId: string, task: TaskParties): OutboxEvent => ({
  type: 'task.deleted',
  data: { taskId },
  audience: [task.ownerId, task.assigneeId],
});

export const attachmentDeleted = (
  row: { id: string; taskId: string },
  task: TaskParties & { projectId: string | null },
): OutboxEvent => ({
  type: 'attachment.deleted',
  data: { attachmentId: row.id, taskId: row.taskId },
  // A project's task names nobody: its project's members read it (the event's project, outbox.ts).
  audience: task.projectId === null ? [task.ownerId, task.assigneeId] : [],
});

/**
 * Records `extra` and a `task.updated` with the state after the change for every task in `taskIds`
 * (tasks touched by a tag, attachment or account change), in the caller's transaction.
 */
export async function recordTaskUpdates(
  tx: SqlSession,
  actorId: string | null,
  taskIds: string[],
  extra: OutboxEvent[] = [],
): Promise<void> {
  const tasks = await readTasksById(tx, taskIds);
  await recordEvents(tx, actorId, [...extra, ...tasks.map((task) => taskChanged('task.updated', task))]);
}
