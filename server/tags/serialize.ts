import type { Tag } from '@task-service/client';
import type { Selection } from 'kysely';
import type { DB } from '../db/query.js';

/** The columns a Tag is made of, for every query that reads tags to show them. */
export const tagColumns = [
  'tags.id',
  'tags.owner_id as ownerId',
  'tags.project_id as projectId',
  'tags.name',
  'tags.name_key as nameKey',
  'tags.color',
  'tags.created_at as createdAt',
] as const;

export type TagRow = Selection<DB, 'tags', (typeof tagColumns)[number]>;

export function serializeTag(row: TagRow): Tag {
  return {
    id: row.id,
    ownerId: row.ownerId,
    projectId: row.projectId,
    name: row.name,
    color: row.color,
    createdAt: row.createdAt.toISOString(),
  };
}
