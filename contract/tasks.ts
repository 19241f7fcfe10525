import { z } from 'zod';
import {
  boundedArray,
  c,
  commaList,
  commonErrors,
  IdSchema,
  IfMatchHeaders,
  IfNoneMatchHeaders,
  PaginationQuerySchema,
  pageOf,
  ProblemSchema,
  SearchSchema,
  storableText,
  TimestampInputSchema,
  TimestampSchema,
  type Alias,
  type Named,
} from './common.js';
import { needs } from './scopes.js';

export const TaskStatusSchema = z.enum(['todo', 'in_progress', 'done']).describe('`todo`, `in_progress` or `done`');
export type TaskStatus = z.infer<typeof TaskStatusSchema>;
/** Listed from lowest to highest; `sort=priority` follows this order. */
export const TaskPrioritySchema = z
  .enum(['low', 'medium', 'high', 'urgent'])
  .describe('From lowest to highest: `low`, `medium`, `high`, `urgent`');
export type TaskPriority = z.infer<typeof TaskPrioritySchema>;

export const TagColorSchema = z
  .string()
  .max(7)
  .regex(/^#[0-9a-fA-F]{6}$/, 'expected a colour as #rrggbb')
  .describe('`#rrggbb`');
export const TagRefSchema = z.object({
  id: IdSchema.describe("The tag's id"),
  name: z.string().describe("The tag's name"),
  color: z.string().describe('`#rrggbb`, lower-case'),
});

const taskSchema = z.object({
  id: IdSchema.describe("The task's id (UUIDv7)"),
  ownerId: IdSchema.describe('The user who created the task and owns it'),
  assigneeId: IdSchema.nullable().describe(
    'The user the task is assigned to, who may read and change it too; null when unassigned',
  ),
  projectId: IdSchema.nullable().describe(
    'The project the task belongs to, whose members see it (editors and admins change it); null for a personal task',
  ),
  parentId: IdSchema.nullable().describe(
    'The task this one is a subtask of (in the same project, or both personal tasks of one owner); null for a top-level task',
  ),
  title: z.string().describe('1 to 200 characters'),
  description: z.string().describe('Free text, up to 10,000 characters; empty when none'),
  status: TaskStatusSchema,
  priority: TaskPrioritySchema,
  dueAt: TimestampSchema.nullable().describe('When the task is due; null when it has no due date'),
  completedAt: TimestampSchema.nullable().describe(
    'Set by the service when the status becomes `done`; null while it is not done',
  ),
  tags: z
    .array(TagRefSchema)
    .describe("The task's tags (its project's, or its owner's on a personal task), ordered by name"),
  attachmentCount: z.number().int().describe('How many files are attached'),
  commentCount: z.number().int().describe('How many comments it has'),
  subtaskCount: z.number().int().describe('How many direct subtasks it has'),
  subtasksDone: z.number().int().describe('How many of its direct subtasks are `done`'),
  blocked: z.boolean().describe('True while a task that is not `done` blocks it (a `blocks` relation)'),
  version: z
    .number()
    .int()
    .describe(
      'Starts at 1 and grows by one with every change to the task as shown here (its fields, tags, counts or `blocked`), each reported by a `task.updated`; the ETag is `"<version>"`',
    ),
  createdAt: TimestampSchema.describe('When the task was created'),
  updatedAt: TimestampSchema.describe('When the task last changed (its fields, tags, attachments or comments)'),
});
export interface Task extends z.output<typeof taskSchema> {}
export const TaskSchema: Named<Task> = taskSchema;

/** What a change changed, with the values before it: any fields of the Task but its version and updatedAt. */
const taskBeforeSchema = taskSchema.omit({ version: true, updatedAt: true }).partial();
export interface TaskBefore extends z.output<typeof taskBeforeSchema> {}
export const TaskBeforeSchema: Named<TaskBefore> = taskBeforeSchema;

/** PostgreSQL text cannot hold U+0000, so it is a validation error rather than a failed write. */
const TitleSchema = storableText(z.string().trim().min(1).max(200)).describe('1 to 200 characters after trimming');
const DescriptionSchema = storableText(z.string().max(10_000)).describe('Free text, up to 10,000 characters');

const DueAtInputSchema = TimestampInputSchema.nullable().describe(
  'RFC 3339 with an offset, e.g. `2026-12-01T17:00:00Z`; null for no due date',
);
const AssigneeInputSchema = IdSchema.nullable().describe(
  'An existing user to assign (400 for an unknown one), or null for none. Only the owner or an administrator may set it; the assignee may only set null (403)',
);

const ProjectInputSchema = IdSchema.nullable().describe(
  'A project you are an editor or admin of (400 otherwise), or null for a personal task. Moving a task between projects needs editor in both; making it personal needs its owner or an administrator',
);

const ParentInputSchema = IdSchema.nullable().describe(
  'A task to make this one a subtask of: one you see, in the same project (or, for a personal task, a personal task of the same owner), at most 8 levels deep and never its own subtask (400 otherwise); null for a top-level task',
);

const taskCreateSchema = z
  .object({
    title: TitleSchema,
    description: DescriptionSchema.default(''),
    status: TaskStatusSchema.default('todo'),
    priority: TaskPrioritySchema.default('medium'),
    dueAt: DueAtInputSchema.default(null),
    assigneeId: AssigneeInputSchema.default(null),
    projectId: ProjectInputSchema.default(null),
    parentId: ParentInputSchema.default(null),
    tagIds: boundedArray(IdSchema, 50)
      .default([])
      .describe(
        "Ids of tags to put on the task (at most 50): your personal tags on a personal task, its project's tags on a project task; any other is 400",
      ),
  })
  .strict();
export interface TaskCreate extends z.output<typeof taskCreateSchema> {}
export interface TaskCreateInput extends z.input<typeof taskCreateSchema> {}
export const TaskCreateSchema: z.ZodType<TaskCreate, z.ZodTypeDef, TaskCreateInput> = taskCreateSchema;

/**
 * PUT: every field of its list required (nullable ones as explicit null), so nothing is reset by
 * omission. parentId came later: optional, so clients that predate it keep the parent as it is.
 */
const taskReplaceSchema = z
  .object({
    title: TitleSchema,
    description: DescriptionSchema,
    status: TaskStatusSchema.describe('`done` sets completedAt; leaving `done` clears it'),
    priority: TaskPrioritySchema,
    dueAt: DueAtInputSchema,
    assigneeId: AssigneeInputSchema,
    parentId: ParentInputSchema.optional(),
  })
  .strict();
export interface TaskReplace extends z.output<typeof taskReplaceSchema> {}
export interface TaskReplaceInput extends z.input<typeof taskReplaceSchema> {}
export const TaskReplaceSchema: z.ZodType<TaskReplace, z.ZodTypeDef, TaskReplaceInput> = taskReplaceSchema;

/** PATCH (JSON merge patch): absent is unchanged, null clears a nullable field, and the description to "". */
const taskPatchSchema = taskReplaceSchema
  .partial()
  .extend({
    description: DescriptionSchema.nullable()
      .transform((description) => description ?? '')
      .optional()
      .describe('Free text, up to 10,000 characters; null clears it (to an empty string)'),
    // PUT keeps its field list (it leaves the project as it is); PATCH moves a task. A task moved
    // out of its parent's project loses its parent unless parentId names one in the new project.
    projectId: ProjectInputSchema.optional(),
  })
  .strict();
export interface TaskPatch extends z.output<typeof taskPatchSchema> {}
export interface TaskPatchInput extends z.input<typeof taskPatchSchema> {}
export const TaskPatchSchema: z.ZodType<TaskPatch, z.ZodTypeDef, TaskPatchInput> = taskPatchSchema;

export const TaskSortSchema = z.enum([
  'createdAt',
  '-createdAt',
  'updatedAt',
  '-updatedAt',
  'dueAt',
  '-dueAt',
  'priority',
  '-priority',
  'title',
  '-title',
]);
export type TaskSort = z.infer<typeof TaskSortSchema>;

/**
 * A project's id, or `none` (personal ones): one string type, so the OpenAPI parameter reads as a
 * string rather than a union.
 */
export const ProjectFilterSchema = z
  .string()
  .max(36)
  .regex(/^(none|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i, 'expected a project id or none')
  .transform((value) => value.toLowerCase());

const taskListQuerySchema = PaginationQuerySchema.extend({
  status: commaList(TaskStatusSchema).optional().describe('Tasks in any of these statuses'),
  priority: commaList(TaskPrioritySchema).optional().describe('Tasks with any of these priorities'),
  tagId: commaList(IdSchema).optional().describe('Tasks carrying every one of these tags (up to 50)'),
  assigneeId: IdSchema.optional().describe('Tasks assigned to this user'),
  projectId: ProjectFilterSchema.optional().describe(
    "One project's tasks, or `none` for personal tasks; a project you cannot see gives an empty list",
  ),
  parentId: IdSchema.optional().describe('The direct subtasks of this task'),
  blocked: z
    .enum(['true', 'false'])
    .transform((value) => value === 'true')
    .optional()
    .describe('`true`: tasks blocked by an unfinished task; `false`: tasks that are not'),
  ownerId: IdSchema.optional().describe(
    'Tasks owned by this user; useful to administrators, as others see only tasks they own or are assigned',
  ),
  dueBefore: TimestampInputSchema.optional().describe(
    'Tasks due strictly before this instant (tasks without a due date never match)',
  ),
  dueAfter: TimestampInputSchema.optional().describe(
    'Tasks due at or after this instant (tasks without a due date never match)',
  ),
  updatedSince: TimestampInputSchema.optional().describe('Tasks changed at or after this instant'),
  q: SearchSchema(200)
    .optional()
    .describe('Tasks whose title or description contains this, ignoring case (1 to 200 characters)'),
  sort: TaskSortSchema.default('-createdAt').describe(
    'The order: a field, descending with a `-` prefix; ties are broken by id. Tasks without a due date sort after those with one',
  ),
}).strict();
export interface TaskListQuery extends z.output<typeof taskListQuerySchema> {}
export interface TaskListQueryInput extends z.input<typeof taskListQuerySchema> {}
/** The schema's own type, by name (it keeps `.extend` and `.strict`). */
export interface TaskListQuerySchemaType extends Alias<typeof taskListQuerySchema> {}
export const TaskListQuerySchema: TaskListQuerySchemaType = taskListQuerySchema;

const TaskParams = z.object({
  task_id: IdSchema.describe(
    "A task you own or are assigned, or one of your projects' tasks (any for an administrator); another is 404",
  ),
});

export const tasksContract = c.router(
  {
    list: {
      method: 'GET',
      metadata: needs('tasks:read'),
      path: '/tasks',
      query: TaskListQuerySchema,
      responses: { 200: pageOf(TaskSchema) },
      summary: 'List the tasks visible to the caller',
      description:
        'Tasks the caller owns or is assigned (administrators: all), keyset-paginated with `limit` and `cursor`. Filters combine with AND; a filter taking several values (`status=todo,done`, or the parameter repeated) matches any of them.',
    },
    get: {
      method: 'GET',
      metadata: needs('tasks:read'),
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
      metadata: needs('tasks:write'),
      path: '/tasks',
      body: TaskCreateSchema,
      responses: { 201: TaskSchema },
      summary: 'Create a task owned by the caller (an unknown assignee or tag is a 400)',
      description:
        'Creates a task owned by the caller, personal or (with projectId) in a project where the caller is an editor or admin; omitted fields take their defaults. An unknown assigneeId (in a project: a non-member), a projectId the caller cannot write to, or a tagIds entry that does not fit the task is a 400 naming the field.',
    },
    replace: {
      method: 'PUT',
      metadata: needs('tasks:write'),
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
      metadata: needs('tasks:write'),
      path: '/tasks/:task_id',
      pathParams: TaskParams,
      headers: IfMatchHeaders,
      body: TaskPatchSchema,
      responses: { 200: TaskSchema, 404: ProblemSchema, 412: ProblemSchema },
      summary: 'Merge-patch a task (application/json or application/merge-patch+json; honours If-Match)',
      description:
        'Changes only the fields sent (JSON merge patch, RFC 7396: null clears dueAt, assigneeId or parentId). If-Match as for PUT (412). The assignee of a personal task may change it but not its assigneeId, except to null (hand it back). In a project, editors and admins change its tasks (viewers: 403). projectId moves the task: editor in both projects; null (personal) or from personal into a project needs its owner or an administrator. A moved task loses its parent (unless parentId names one in the new project) and its subtasks, which stay behind, become top-level.',
    },
    remove: {
      method: 'DELETE',
      metadata: needs('tasks:write'),
      path: '/tasks/:task_id',
      pathParams: TaskParams,
      headers: IfMatchHeaders,
      body: c.noBody(),
      responses: { 204: c.noBody(), 403: ProblemSchema, 404: ProblemSchema, 412: ProblemSchema },
      summary: 'Delete a task with its attachments, tag links and relations (owner or admin)',
      description:
        'Deletes the task with its attachments, tag links and relations; its subtasks become top-level (each with a `task.updated`). Only the owner or an administrator (the assignee gets 403). If-Match as for PUT.',
    },
  },
  { commonResponses: commonErrors },
);
