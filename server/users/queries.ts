import type { UserListQuery } from '@task-service/client';
import type { SelectQueryBuilder } from 'kysely';
import type { DB } from '../db/query.js';
import { containsPattern } from '../db/search.js';

/** The filters of GET /users. */
export function filterUsers<O>(
  users: SelectQueryBuilder<DB, 'users', O>,
  query: UserListQuery,
): SelectQueryBuilder<DB, 'users', O> {
  let filtered = users;
  if (query.role) filtered = filtered.where('users.role', '=', query.role);
  if (query.q) {
    const pattern = containsPattern(query.q);
    filtered = filtered.where((eb) => eb.or([eb('users.email', 'ilike', pattern), eb('users.name', 'ilike', pattern)]));
  }
  return filtered;
}
