import type { Prisma } from '../generated/prisma/client.js';

/**
 * Gives every matching task a new version and updatedAt. Besides direct edits, a task changes when
 * its tag set, a tag's name or colour, its attachments or its assignee's existence change: all show
 * in its representation, so its ETag must change too.
 */
export function touchTasks(db: Prisma.TransactionClient, where: Prisma.TaskWhereInput): Promise<Prisma.BatchPayload> {
  return db.task.updateMany({ where, data: { version: { increment: 1 }, updatedAt: new Date() } });
}
