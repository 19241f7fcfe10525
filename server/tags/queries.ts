import { createHash } from 'node:crypto';
import type { TagListQuery } from '@task-service/client';
import { containsText } from '../db/search.js';
import type { Prisma } from '../generated/prisma/client.js';
import { isAdmin, type Principal } from '../http/principal.js';

/** Admins see every tag, others only their own. */
export function tagVisibleTo(principal: Principal): Prisma.TagWhereInput {
  return isAdmin(principal) ? {} : { ownerId: principal.userId };
}

export function tagFilters(query: TagListQuery): Prisma.TagWhereInput[] {
  const where: Prisma.TagWhereInput[] = [];
  if (query.ownerId) where.push({ ownerId: query.ownerId });
  if (query.q) where.push({ name: containsText(query.q) });
  return where;
}

/** The key that makes tag names unique per owner regardless of case. */
export const nameKeyOf = (name: string): string => name.toLowerCase();

/** Tags by name ignoring case, ties broken by id: for tag lists and for a task's `tags`. */
export const tagsByName: Prisma.TagOrderByWithRelationInput[] = [{ nameKey: 'asc' }, { name: 'asc' }, { id: 'asc' }];

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
