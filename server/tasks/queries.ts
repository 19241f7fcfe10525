import type { Prisma } from '../generated/prisma/client.js';
import { isAdmin, type Principal } from '../http/principal.js';

/** The one visibility rule: admins see every task, others what they own or are assigned to. */
export function taskVisibleTo(principal: Principal): Prisma.TaskWhereInput {
  if (isAdmin(principal)) return {};
  return { OR: [{ ownerId: principal.userId }, { assigneeId: principal.userId }] };
}

/** One task by id, if the caller may see it. */
export const visibleTask = (principal: Principal, taskId: string): Prisma.TaskWhereInput => ({
  AND: [{ id: taskId }, taskVisibleTo(principal)],
});
