import type { UserListQuery } from '../../contract/users.js';
import type { Prisma } from '../generated/prisma/client.js';
import { containsText } from '../db/search.js';
import type { Cursor } from '../http/pagination.js';

/** The filters of GET /users, and the keyset position after `cursor` (ids are time-ordered). */
export function userFilters(query: UserListQuery, cursor: Cursor | undefined): Prisma.UserWhereInput[] {
  const where: Prisma.UserWhereInput[] = [];
  if (query.role) where.push({ role: query.role });
  if (query.q) {
    where.push({ OR: [{ email: containsText(query.q) }, { name: containsText(query.q) }] });
  }
  if (cursor) where.push({ id: { gt: cursor.id } });
  return where;
}
