import type { UserListQuery } from '@task-service/client';
import type { Prisma } from '../generated/prisma/client.js';
import { containsText } from '../db/search.js';

/** The filters of GET /users. */
export function userFilters(query: UserListQuery): Prisma.UserWhereInput[] {
  const where: Prisma.UserWhereInput[] = [];
  if (query.role) where.push({ role: query.role });
  if (query.q) {
    where.push({ OR: [{ email: containsText(query.q) }, { name: containsText(query.q) }] });
  }
  return where;
}
