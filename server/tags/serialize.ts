import type { Tag } from '@task-service/client';
import type { Tag as TagRow } from '../generated/prisma/client.js';

export type { TagRow };

export function serializeTag(row: TagRow): Tag {
  return {
    id: row.id,
    ownerId: row.ownerId,
    name: row.name,
    color: row.color,
    createdAt: row.createdAt.toISOString(),
  };
}
