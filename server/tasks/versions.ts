import type { Prisma } from '../generated/prisma/client.js';

/**
 * Gives every matching task a new version and updatedAt, and returns their ids (each gets a
 * `task.updated` event). Besides direct edits, a task changes when its tag set, a tag's name or
 * colour, its attachments or its assignee's existence change: all show in its representation, so
 * its ETag must change too.
 */
export async function touchTasks(db: Prisma.TransactionClient, where: Prisma.TaskWhereInput): Promise<string[]> {
  const touched = await db.task.updateManyAndReturn({
    where,
    data: { version: { increment: 1 }, updatedAt: new Date() },
    select: { id: true },
  });
  return touched.map((task) => task.id);
}
