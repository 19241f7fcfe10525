import type { Comment } from '@task-service/client';
import type { Selection } from 'kysely';
import type { DB } from '../db/query.js';
import { iso } from '../tasks/change-events.js';

/** The columns a Comment is made of, for every query that reads one to show it. */
export const commentColumns = [
  'comments.id',
  'comments.task_id as taskId',
  'comments.author_id as authorId',
  'comments.body',
  'comments.created_at as createdAt',
  'comments.updated_at as updatedAt',
  'comments.edited_at as editedAt',
] as const;

export type CommentRow = Selection<DB, 'comments', (typeof commentColumns)[number]>;

export const serializeComment = (row: CommentRow): Comment => ({
  id: row.id,
  taskId: row.taskId,
  authorId: row.authorId,
  body: row.body,
  createdAt: row.createdAt.toISOString(),
  updatedAt: row.updatedAt.toISOString(),
  editedAt: row.editedAt?.toISOString() ?? null,
});

/** The contract's Comment of the row `c` as jsonb, for its events (serializeComment's shape). */
export const commentJson = (c: string) => `jsonb_build_object(
    'id', ${c}.id, 'taskId', ${c}.task_id, 'authorId', ${c}.author_id, 'body', ${c}.body,
    'createdAt', ${iso(`${c}.created_at`)}, 'updatedAt', ${iso(`${c}.updated_at`)}, 'editedAt', ${iso(`${c}.edited_at`)})`;
