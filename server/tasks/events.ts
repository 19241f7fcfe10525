import type { Task, TaskBefore } from '@task-service/client';
import { sql } from 'kysely';
import { rawQuery } from '../db/query.js';
import type { SqlSession } from '../db/sql.js';
import { recordEvents, type OutboxEvent } from '../events/outbox.js';
import { previousOf, taskJson } from './serialize.js';
import type { TouchedTask } from './versions.js';

/** Who may see a task's events: its owner and assignee, and an assignee the change removed. */
interface TaskParties {
  ownerId: string;
  assigneeId: string | null;
}

/** A task's creation, for writers outside the tasks' store (server/tasks/store.ts writes its own in SQL). */
export const taskCreated = (task: Task): OutboxEvent => ({
  type: 'task.created',
  data: { task },
  audience: task.projectId === null ? [task.ownerId, task.assigneeId] : [],
});

export const taskUpdated = (task: Task, previous: TaskBefore, formerAssigneeId?: string | null): OutboxEvent => ({
  type: 'task.updated',
  data: { task, previous },
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
 * Records `extra` and a `task.updated` with the state after the change, and what it changed
 * (previousOf the task before), for every task `touched` (touchTasks), in the caller's transaction.
 */
export async function recordTaskUpdates(
  tx: SqlSession,
  actorId: string | null,
  touched: TouchedTask[],
  extra: OutboxEvent[] = [],
): Promise<void> {
  const given = JSON.stringify(touched);
  const rows =
    touched.length === 0
      ? []
      : await tx.all(
          rawQuery(sql<{ task: Task; previous: TaskBefore }>`
            SELECT ${taskJson()} AS task, ${previousOf(sql`given.before`, sql`${taskJson()}::jsonb`)} AS previous
            FROM tasks JOIN jsonb_to_recordset(${given}::jsonb) AS given(id uuid, before jsonb) ON given.id = tasks.id
            ORDER BY tasks.id`),
        );
  await recordEvents(tx, actorId, [...extra, ...rows.map((row) => taskUpdated(row.task, row.previous))]);
}
