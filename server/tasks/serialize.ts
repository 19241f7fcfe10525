import type { Task } from '@task-service/client';
import type { Prisma } from '../generated/prisma/client.js';
import { tagsByName } from '../tags/queries.js';

/** What a task row must load to become a Task: its tags (by name) and its attachment count. */
export const taskInclude = {
  tags: {
    select: { tag: { select: { id: true, name: true, color: true } } },
    orderBy: tagsByName.map((tag) => ({ tag })),
  },
  _count: { select: { attachments: true } },
} satisfies Prisma.TaskInclude;

export type TaskRow = Prisma.TaskGetPayload<{ include: typeof taskInclude }>;

export function serializeTask(row: TaskRow): Task {
  return {
    id: row.id,
    ownerId: row.ownerId,
    assigneeId: row.assigneeId,
    title: row.title,
    description: row.description,
    status: row.status,
    priority: row.priority,
    dueAt: row.dueAt?.toISOString() ?? null,
    completedAt: row.completedAt?.toISOString() ?? null,
    tags: row.tags.map(({ tag }) => tag),
    attachmentCount: row._count.attachments,
    version: row.version,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}
