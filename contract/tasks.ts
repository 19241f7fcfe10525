import { z } from 'zod';
import { c, commaList, commonErrors, IdSchema, IfMatchHeaders, IfNoneMatchHeaders, PaginationQuerySchema, pageOf, ProblemSchema, SearchSchema, storableText, TimestampInputSchema, TimestampSchema } from './common.js';

export const TaskStatusSchema = z.enum(['todo', 'in_progress', 'done']);
export type TaskStatus = z.infer<typeof TaskStatusSchema>;
/** Listed from lowest to highest; `sort=priority` follows this order. */
export const TaskPrioritySchema = z.enum(['low', 'medium', 'high', 'urgent']);
export type TaskPriority = z.infer<typeof TaskPrioritySchema>;

export const TagColorSchema = z.string().regex(/^#[0-9a-fA-F]{6}$/, 'expected a colour as #rrggbb');
export const TagRefSchema = z.object({ id: IdSchema, name: z.string(), color: z.string() });

export const TaskSchema = z.object({
  id: IdSchema,
  ownerId: IdSchema,
  assigneeId: IdSchema.nullable(),
  title: z.string(),
  description: z.string(),
  status: TaskStatusSchema,
  priority: TaskPrioritySchema,
  dueAt: TimestampSchema.nullable(),
  completedAt: TimestampSchema.nullable(),
  /** The task's tags, ordered by name. */
  tags: z.array(TagRefSchema),
  attachmentCount: z.number().int(),
  /**
   * Starts at 1 and grows by one with every change to the task as shown here (its fields, its tags,
   * its attachment count); the ETag is `"<version>"`.
   */
  version: z.number().int(),
  createdAt: TimestampSchema,
  updatedAt: TimestampSchema,
});
export type Task = z.infer<typeof TaskSchema>;

/** PostgreSQL text cannot hold U+0000, so it is a validation error rather than a failed write. */
const TitleSchema = storableText(z.string().trim().min(1).max(200));
const DescriptionSchema = storableText(z.string().max(10_000));

export const TaskCreateSchema = z
  .object({
    title: TitleSchema,
    description: DescriptionSchema.default(''),
    status: TaskStatusSchema.default('todo'),
    priority: TaskPrioritySchema.default('medium'),
    dueAt: TimestampInputSchema.nullable().default(null),
    assigneeId: IdSchema.nullable().default(null),
    /** Tags of the task's owner to attach at creation. */
    tagIds: z.array(IdSchema).max(50).default([]),
  })
  .strict();
export type TaskCreate = z.infer<typeof TaskCreateSchema>;

/** PUT: every field required (nullable ones as explicit null), so nothing is reset by omission. */
export const TaskReplaceSchema = z
  .object({
    title: TitleSchema,
    description: DescriptionSchema,
    status: TaskStatusSchema,
    priority: TaskPrioritySchema,
    dueAt: TimestampInputSchema.nullable(),
    assigneeId: IdSchema.nullable(),
  })
  .strict();
export type TaskReplace = z.infer<typeof TaskReplaceSchema>;

/** PATCH (JSON merge patch): absent is unchanged, null clears a nullable field. */
export const TaskPatchSchema = TaskReplaceSchema.partial().strict();
export type TaskPatch = z.infer<typeof TaskPatchSchema>;

export const TaskSortSchema = z.enum([
  'createdAt', '-createdAt', 'updatedAt', '-updatedAt', 'dueAt', '-dueAt', 'priority', '-priority', 'title', '-title',
]);
export type TaskSort = z.infer<typeof TaskSortSchema>;

export const TaskListQuerySchema = PaginationQuerySchema.extend({
  status: commaList(TaskStatusSchema).optional(),
  priority: commaList(TaskPrioritySchema).optional(),
  /** A task must carry every listed tag. */
  tagId: commaList(IdSchema).optional(),
  assigneeId: IdSchema.optional(),
  /** Admin only in effect: other callers see only their own tasks anyway. */
  ownerId: IdSchema.optional(),
  dueBefore: TimestampInputSchema.optional(),
  dueAfter: TimestampInputSchema.optional(),
  updatedSince: TimestampInputSchema.optional(),
  q: SearchSchema(200).optional(),
  /** Default `-createdAt`; ties are broken by id. Tasks without a due date sort after those with one. */
  sort: TaskSortSchema.default('-createdAt'),
}).strict();
export type TaskListQuery = z.infer<typeof TaskListQuerySchema>;

const TaskParams = z.object({ task_id: IdSchema });

export const tasksContract = c.router(
  {
    list: {
      method: 'GET',
      path: '/tasks',
      query: TaskListQuerySchema,
      responses: { 200: pageOf(TaskSchema) },
      summary: 'List the tasks visible to the caller',
      description:
        'Tasks the caller owns or is assigned (administrators: all), keyset-paginated with `limit` and `cursor`. Filters combine with AND; a filter taking several values (`status=todo,done`, or the parameter repeated) matches any of them.',
    },
    get: {
      method: 'GET',
      path: '/tasks/:task_id',
      pathParams: TaskParams,
      headers: IfNoneMatchHeaders,
      responses: { 200: TaskSchema, 304: c.noBody(), 404: ProblemSchema },
      summary: 'Get a task (honours If-None-Match)',
      description:
        'A task with its tags and attachment count. Sends `ETag: "<version>"`; with a matching If-None-Match the answer is 304 with no body.',
    },
    create: {
      method: 'POST',
      path: '/tasks',
      body: TaskCreateSchema,
      responses: { 201: TaskSchema },
      summary: 'Create a task owned by the caller (an unknown assignee or tag is a 400)',
      description:
        "Creates a task owned by the caller; omitted fields take their defaults. An unknown assigneeId or a tagIds entry that is not one of the caller's tags is a 400 naming the field.",
    },
    replace: {
      method: 'PUT',
      path: '/tasks/:task_id',
      pathParams: TaskParams,
      headers: IfMatchHeaders,
      body: TaskReplaceSchema,
      responses: { 200: TaskSchema, 404: ProblemSchema, 412: ProblemSchema },
      summary: 'Replace a task (honours If-Match)',
      description:
        'Replaces every editable field (nullable ones as explicit null). Send If-Match with the ETag you read: a task changed meanwhile answers 412 and is left as it is. Setting status to done sets completedAt; leaving done clears it.',
    },
    update: {
      method: 'PATCH',
      path: '/tasks/:task_id',
      pathParams: TaskParams,
      headers: IfMatchHeaders,
      body: TaskPatchSchema,
      responses: { 200: TaskSchema, 404: ProblemSchema, 412: ProblemSchema },
      summary: 'Merge-patch a task (application/json or application/merge-patch+json; honours If-Match)',
      description:
        'Changes only the fields sent (JSON merge patch, RFC 7396: null clears dueAt or assigneeId). If-Match as for PUT (412). The assignee may change a task but not its assigneeId, except to null (hand it back).',
    },
    remove: {
      method: 'DELETE',
      path: '/tasks/:task_id',
      pathParams: TaskParams,
      headers: IfMatchHeaders,
      body: c.noBody(),
      responses: { 204: c.noBody(), 403: ProblemSchema, 404: ProblemSchema, 412: ProblemSchema },
      summary: 'Delete a task with its attachments and tag links (owner or admin)',
      description:
        'Deletes the task with its attachments and tag links. Only the owner or an administrator (the assignee gets 403). If-Match as for PUT.',
    },
  },
  { commonResponses: commonErrors },
);
