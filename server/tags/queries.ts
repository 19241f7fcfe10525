import { createHash } from 'node:crypto';
import type { TagListQuery } from '@task-service/client';
import type { ExpressionBuilder, SelectQueryBuilder } from 'kysely';
import type { DB } from '../db/query.js';
import { containsPattern } from '../db/search.js';
import { isAdmin, type Principal } from '../http/principal.js';

/** Admins see every tag, others only their own. */
export const tagVisibleTo = (principal: Principal) => (eb: ExpressionBuilder<DB, 'tags'>) =>
  isAdmin(principal) ? eb.lit(true) : eb('tags.owner_id', '=', principal.userId);

/** The filters of GET /tags. */
export function filterTags<O>(
  tags: SelectQueryBuilder<DB, 'tags', O>,
  query: TagListQuery,
): SelectQueryBuilder<DB, 'tags', O> {
  let filtered = tags;
  if (query.ownerId) filtered = filtered.where('tags.owner_id', '=', query.ownerId);
  if (query.q) filtered = filtered.where('tags.name', 'ilike', containsPattern(query.q));
  return filtered;
}

/** The key that makes tag names unique per owner regardless of case. */
export const nameKeyOf = (name: string): string => name.toLowerCase();

const PALETTE = [
  '#e53935',
  '#d81b60',
  '#8e24aa',
  '#5e35b1',
  '#3949ab',
  '#1e88e5',
  '#00897b',
  '#43a047',
  '#7cb342',
  '#fdd835',
  '#fb8c00',
  '#6d4c41',
];

/** A colour for a tag created without one: the same name always gets the same colour. */
export function defaultColorFor(name: string): string {
  const digest = createHash('sha256').update(nameKeyOf(name)).digest();
  return PALETTE[digest.readUInt32BE(0) % PALETTE.length] ?? '#757575';
}
