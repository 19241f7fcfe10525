import { z } from 'zod';
import {
  c,
  commonErrors,
  IdSchema,
  listOf,
  PaginationQuerySchema,
  pageOf,
  ProblemSchema,
  SearchSchema,
  storableText,
  TimestampSchema,
  type Named,
} from './common.js';
import { needs } from './scopes.js';
import { ProjectFilterSchema, TagColorSchema } from './tasks.js';

const tagSchema = z.object({
  id: IdSchema.describe("The tag's id (UUIDv7)"),
  ownerId: IdSchema.describe("The user who created the tag; a personal tag only goes on its owner's personal tasks"),
  projectId: IdSchema.nullable().describe(
    'The project the tag belongs to, whose members see it and whose tasks alone carry it; null for a personal tag',
  ),
  name: z.string().describe('1 to 50 characters; unique per owner (a project tag: per project), ignoring case'),
  color: TagColorSchema.describe('`#rrggbb`, lower-case'),
  createdAt: TimestampSchema.describe('When the tag was created'),
});
export interface Tag extends z.output<typeof tagSchema> {}
export const TagSchema: Named<Tag> = tagSchema;

const TagNameSchema = storableText(z.string().trim().min(1).max(50)).describe(
  '1 to 50 characters after trimming; unique among your tags ignoring case (409 tag_name_taken)',
);

const tagCreateSchema = z
  .object({
    name: TagNameSchema,
    color: TagColorSchema.optional().describe(
      '`#rrggbb` in either case, stored lower-case. Default: picked by the service from a fixed palette, the same for the same name',
    ),
    projectId: IdSchema.nullable()
      .default(null)
      .describe(
        'A project you are an editor or admin of (400 otherwise), for a project tag; null (default) for a personal tag',
      ),
  })
  .strict();
export interface TagCreate extends z.output<typeof tagCreateSchema> {}
export interface TagCreateInput extends z.input<typeof tagCreateSchema> {}
export const TagCreateSchema: z.ZodType<TagCreate, z.ZodTypeDef, TagCreateInput> = tagCreateSchema;

const tagPatchSchema = z
  .object({
    name: TagNameSchema.optional(),
    color: TagColorSchema.optional().describe('`#rrggbb` in either case, stored lower-case'),
  })
  .strict();
export interface TagPatch extends z.output<typeof tagPatchSchema> {}
export interface TagPatchInput extends z.input<typeof tagPatchSchema> {}
export const TagPatchSchema: z.ZodType<TagPatch, z.ZodTypeDef, TagPatchInput> = tagPatchSchema;

const tagListQuerySchema = PaginationQuerySchema.extend({
  q: SearchSchema(50).optional().describe('Tags whose name contains this, ignoring case (1 to 50 characters)'),
  ownerId: IdSchema.optional().describe("One owner's tags; useful to administrators, as others see only their own"),
  projectId: ProjectFilterSchema.optional().describe(
    "One project's tags, or `none` for personal tags; a project you cannot see gives an empty list",
  ),
}).strict();
export interface TagListQuery extends z.output<typeof tagListQuerySchema> {}
export interface TagListQueryInput extends z.input<typeof tagListQuerySchema> {}
export const TagListQuerySchema: z.ZodType<TagListQuery, z.ZodTypeDef, TagListQueryInput> = tagListQuerySchema;

const TagIdSchema = IdSchema.describe(
  "One of your tags or your projects' tags (any for an administrator); another is 404",
);
const TaskIdSchema = IdSchema.describe(
  "A task you own or are assigned, or one of your projects' tasks (any for an administrator); another is 404",
);
const TagParams = z.object({ tag_id: TagIdSchema });
const TaskTagParams = z.object({
  task_id: TaskIdSchema,
  tag_id: IdSchema.describe(
    "A tag of the task's project on a project task (another you see is 400), one of the owner's personal tags on a personal task (another is 404)",
  ),
});

export const tagsContract = c.router(
  {
    list: {
      method: 'GET',
      metadata: needs('tags:read'),
      path: '/tags',
      query: TagListQuerySchema,
      responses: { 200: pageOf(TagSchema) },
      summary: "List the caller's tags and their projects' tags (admin: all), oldest first",
      description:
        "The caller's personal tags and their projects' tags (administrators: everyone's, or one owner's with ownerId), oldest first, keyset-paginated; `q` searches names, `projectId` picks one project's (or `none`: personal tags).",
    },
    get: {
      method: 'GET',
      metadata: needs('tags:read'),
      path: '/tags/:tag_id',
      pathParams: TagParams,
      responses: { 200: TagSchema, 404: ProblemSchema },
      summary: 'Get a tag',
      description: "One of the caller's tags (any tag for an administrator).",
    },
    create: {
      method: 'POST',
      metadata: needs('tags:write'),
      path: '/tags',
      body: TagCreateSchema,
      responses: { 201: TagSchema, 409: ProblemSchema },
      summary: 'Create a tag',
      description:
        "Creates a personal tag, or with projectId a project's tag (an editor's or admin's); names are unique per owner, or per project, ignoring case (409 tag_name_taken). Without a colour one is picked from a fixed palette.",
    },
    update: {
      method: 'PATCH',
      metadata: needs('tags:write'),
      path: '/tags/:tag_id',
      pathParams: TagParams,
      body: TagPatchSchema,
      responses: { 200: TagSchema, 404: ProblemSchema, 409: ProblemSchema },
      summary: 'Rename or recolour a tag',
      description:
        'Renames or recolours a tag; every task carrying it gets a new version (its representation changed).',
    },
    remove: {
      method: 'DELETE',
      metadata: needs('tags:write'),
      path: '/tags/:tag_id',
      pathParams: TagParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 404: ProblemSchema },
      summary: 'Delete a tag and remove it from every task (each such task gets a new version)',
      description: 'Deletes a tag and takes it off every task (each such task gets a new version).',
    },
    listForTask: {
      method: 'GET',
      metadata: needs('tasks:read'),
      path: '/tasks/:task_id/tags',
      pathParams: z.object({ task_id: TaskIdSchema }),
      responses: { 200: listOf(TagSchema), 404: ProblemSchema },
      summary: "A task's tags, ordered by name",
      description: 'The tags on a task the caller can see, ordered by name.',
    },
    addToTask: {
      method: 'POST',
      metadata: needs('tasks:write'),
      path: '/tasks/:task_id/tags/:tag_id',
      pathParams: TaskTagParams,
      body: c.noBody(),
      responses: { 200: TagSchema, 201: TagSchema, 404: ProblemSchema },
      summary:
        "Put a tag on a task: its project's tag, or one of its owner's personal tags (201 new, 200 already there; a new link bumps the task's version)",
      description:
        "Puts one of the task owner's tags on the task: 201 when newly added (the task's version grows), 200 when it was already there.",
    },
    removeFromTask: {
      method: 'DELETE',
      metadata: needs('tasks:write'),
      path: '/tasks/:task_id/tags/:tag_id',
      pathParams: TaskTagParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 404: ProblemSchema },
      summary: "Take a tag off a task (404 when it is not on it; bumps the task's version)",
      description: "Takes a tag off a task (404 when it is not on it); the task's version grows.",
    },
  },
  { commonResponses: commonErrors },
);
