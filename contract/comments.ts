import { z } from 'zod';
import {
  c,
  commonErrors,
  IdSchema,
  PaginationQuerySchema,
  pageOf,
  ProblemSchema,
  storableText,
  TimestampSchema,
  type Alias,
  type Named,
} from './common.js';
import { needs } from './scopes.js';

const commentSchema = z.object({
  id: IdSchema.describe("The comment's id (UUIDv7)"),
  taskId: IdSchema.describe('The task it is on'),
  authorId: IdSchema.nullable().describe(
    'The user who wrote it; null once that account is deleted (the comment stays)',
  ),
  body: z.string().describe('Markdown, stored and returned as sent: 1 to 10,000 characters'),
  createdAt: TimestampSchema.describe('When it was written'),
  updatedAt: TimestampSchema.describe('When it last changed (its creation until edited)'),
  editedAt: TimestampSchema.nullable().describe('When its author last edited it; null if never edited'),
});
export interface Comment extends z.output<typeof commentSchema> {}
export const CommentSchema: Named<Comment> = commentSchema;

/** PostgreSQL text cannot hold U+0000, so it is a validation error rather than a failed write. */
const BodySchema = storableText(z.string().min(1).max(10_000))
  .refine((body) => body.trim().length > 0, 'Must contain more than white space')
  .describe('Markdown, 1 to 10,000 characters, not only white space');

const commentInputSchema = z.object({ body: BodySchema }).strict();
export interface CommentInput extends z.output<typeof commentInputSchema> {}
export const CommentInputSchema: Named<CommentInput> = commentInputSchema;

const commentListQuerySchema = PaginationQuerySchema.strict();
export interface CommentListQuery extends z.output<typeof commentListQuerySchema> {}
export interface CommentListQueryInput extends z.input<typeof commentListQuerySchema> {}
/** The schema's own type, by name (it keeps `.extend` and `.strict`). */
export interface CommentListQuerySchemaType extends Alias<typeof commentListQuerySchema> {}
export const CommentListQuerySchema: CommentListQuerySchemaType = commentListQuerySchema;

const TaskCommentsParams = z.object({
  task_id: IdSchema.describe(
    "A task you own or are assigned, or one of your projects' tasks (any for an administrator); another is 404",
  ),
});
const CommentParams = z.object({
  comment_id: IdSchema.describe('A comment on a task you can see (any for an administrator); another is 404'),
});

export const commentsContract = c.router(
  {
    listForTask: {
      method: 'GET',
      metadata: needs('tasks:read'),
      path: '/tasks/:task_id/comments',
      pathParams: TaskCommentsParams,
      query: CommentListQuerySchema,
      responses: { 200: pageOf(CommentSchema), 404: ProblemSchema },
      summary: "A task's comments, oldest first",
      description:
        'The comments of a task the caller can see (every member of its project, viewers included), oldest first, keyset-paginated with `limit` and `cursor`.',
    },
    create: {
      method: 'POST',
      metadata: needs('tasks:write'),
      path: '/tasks/:task_id/comments',
      pathParams: TaskCommentsParams,
      body: CommentInputSchema,
      responses: { 201: CommentSchema, 403: ProblemSchema, 404: ProblemSchema, 409: ProblemSchema },
      summary: 'Comment on a task (whoever may change the task)',
      description:
        "Whoever may change the task comments on it: the owner and assignee of a personal task, an editor or admin of the task's project, an administrator (a viewer gets 403). " +
        "Location names the new comment. The task's commentCount and version change (a `comment.created` and a `task.updated`). " +
        'A task holds at most TASK_MAX_COMMENTS comments (default 10,000): 409 `quota_exceeded`.',
    },
    get: {
      method: 'GET',
      metadata: needs('tasks:read'),
      path: '/comments/:comment_id',
      pathParams: CommentParams,
      responses: { 200: CommentSchema, 404: ProblemSchema },
      summary: 'Get a comment',
      description: 'A comment on a task the caller can see.',
    },
    update: {
      method: 'PATCH',
      metadata: needs('tasks:write'),
      path: '/comments/:comment_id',
      pathParams: CommentParams,
      body: CommentInputSchema,
      responses: { 200: CommentSchema, 403: ProblemSchema, 404: ProblemSchema },
      summary: 'Edit a comment (its author only)',
      description:
        'Replaces the body and sets editedAt (a `comment.updated`). Only its author, while they may still comment on the task; anyone else who can see it gets 403. The task does not change.',
    },
    remove: {
      method: 'DELETE',
      metadata: needs('tasks:write'),
      path: '/comments/:comment_id',
      pathParams: CommentParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 403: ProblemSchema, 404: ProblemSchema },
      summary: "Delete a comment (its author, a project admin, a personal task's owner, or an admin)",
      description:
        "Deletes the comment (a `comment.deleted`); the task's commentCount and version change (a `task.updated`). Its author (while they may still comment on the task), an admin of the task's project, the owner of a personal task, or an administrator; anyone else who can see it gets 403.",
    },
  },
  { commonResponses: commonErrors },
);
