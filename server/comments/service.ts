import type { Comment, CommentListQuery } from '@task-service/client';
import type { AppContext } from '../context.js';
import { sql } from 'kysely';
import { preparedQuery, tables } from '../db/query.js';
import { announceEvents } from '../events/signal.js';
import { AppError, notFound } from '../http/errors.js';
import { createdAfterId, creationCursor, toPage, type ListExchange, type Page } from '../http/pagination.js';
import type { Principal } from '../http/principal.js';
import { taskVisibleTo } from '../tasks/queries.js';
import { findVisibleTaskRef } from '../tasks/service.js';
import { commentColumns, serializeComment, type CommentRow } from './serialize.js';
import { insertComment, removeComment, updateComment } from './store.js';

/** A comment on a task the caller may see, or 404. */
export async function findVisibleComment(
  ctx: AppContext,
  principal: Principal,
  commentId: string,
): Promise<CommentRow> {
  const row = await ctx.db.sql.first(
    tables
      .selectFrom('comments')
      .innerJoin('tasks', 'tasks.id', 'comments.task_id')
      .select(commentColumns)
      .where('comments.id', '=', commentId)
      .where(taskVisibleTo(principal)),
  );
  if (!row) throw notFound('comment');
  return row;
}

/**
 * A page of a task's comments after the comment `after` (if any), with one more to tell that a next
 * page exists: oldest first (ids are UUIDv7, so id order is creation order), along the index (task_id, id).
 */
export const commentPage = (taskId: string, limit: number, after: string | undefined) =>
  after === undefined
    ? builtCommentPage({ taskId, after: '', rows: String(limit + 1) }, 'first')
    : builtCommentPage({ taskId, after, rows: String(limit + 1) }, 'after');

/** commentPage's two statements, each built once: the page's values are only bound to it. */
const builtCommentPage = preparedQuery(
  (value: (key: 'taskId' | 'after' | 'rows') => string, shape: 'first' | 'after') => {
    const page = tables
      .selectFrom('comments')
      .select(commentColumns)
      .where('comments.task_id', '=', value('taskId'))
      .orderBy('comments.id')
      // The row count as a parameter, as a number would be (pg sends both as text).
      .limit(sql<number>`${value('rows')}`);
    return shape === 'first' ? page : page.where('comments.id', '>', value('after'));
  },
);

export async function listComments(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  query: CommentListQuery,
  http: ListExchange,
): Promise<Page<Comment>> {
  await findVisibleTaskRef(ctx, principal, taskId);
  const after = createdAfterId(ctx.cursors, query.cursor);
  const rows = await ctx.db.sql.all(commentPage(taskId, query.limit, after));
  return toPage(ctx.cursors, http, rows, query.limit, creationCursor, serializeComment);
}

export async function createComment(
  ctx: AppContext,
  principal: Principal,
  taskId: string,
  body: string,
): Promise<CommentRow> {
  const outcome = await insertComment(ctx, principal, taskId, body, new Date());
  switch (outcome.kind) {
    case 'no_task':
      throw notFound('task');
    case 'read_only':
      throw new AppError(
        'forbidden',
        "Only whoever may change the task comments on it: an editor or admin of the task's project (a viewer reads comments)",
      );
    case 'full':
      throw new AppError(
        'quota_exceeded',
        `Quota "taskComments" reached: a task has at most ${ctx.config.taskMaxComments} comments (TASK_MAX_COMMENTS)`,
      );
    case 'created':
      announceEvents(ctx);
      return outcome.row;
  }
}

export async function editComment(
  ctx: AppContext,
  principal: Principal,
  commentId: string,
  body: string,
): Promise<CommentRow> {
  const outcome = await updateComment(ctx, principal, commentId, body, new Date());
  switch (outcome.kind) {
    case 'not_found':
      throw notFound('comment');
    case 'forbidden':
      throw new AppError('forbidden', 'Only its author, while they may still comment on the task, edits a comment');
    case 'changed':
      announceEvents(ctx);
      return outcome.row;
  }
}

export async function deleteComment(ctx: AppContext, principal: Principal, commentId: string): Promise<void> {
  const outcome = await removeComment(ctx, principal, commentId, new Date());
  if (outcome === 'not_found') throw notFound('comment');
  if (outcome === 'forbidden')
    throw new AppError(
      'forbidden',
      "Only its author, an admin of the task's project, the owner of a personal task or an administrator deletes a comment",
    );
  announceEvents(ctx);
}
