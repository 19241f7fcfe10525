import { z } from 'zod';
import { c, commonErrors, IdSchema, listOf, PaginationQuerySchema, pageOf, ProblemSchema, SearchSchema, storableText, TimestampSchema } from './common.js';
import { TagColorSchema } from './tasks.js';

export const TagSchema = z.object({
  id: IdSchema,
  ownerId: IdSchema,
  /** Unique per owner, ignoring case. */
  name: z.string(),
  /** `#rrggbb`, lower-case. */
  color: TagColorSchema,
  createdAt: TimestampSchema,
});
export type Tag = z.infer<typeof TagSchema>;

/** 1–50 characters after trimming. */
const TagNameSchema = storableText(z.string().trim().min(1).max(50));

export const TagCreateSchema = z
  .object({
    name: TagNameSchema,
    /** `#rrggbb` in either case, stored lower-case. Default: picked by the server from a fixed palette, the same for the same name. */
    color: TagColorSchema.optional(),
  })
  .strict();
export type TagCreate = z.infer<typeof TagCreateSchema>;

export const TagPatchSchema = z.object({ name: TagNameSchema.optional(), color: TagColorSchema.optional() }).strict();
export type TagPatch = z.infer<typeof TagPatchSchema>;

export const TagListQuerySchema = PaginationQuerySchema.extend({
  q: SearchSchema(50).optional(),
  /** Admin only in effect: other callers see only their own tags. */
  ownerId: IdSchema.optional(),
}).strict();
export type TagListQuery = z.infer<typeof TagListQuerySchema>;

const TagParams = z.object({ tag_id: IdSchema });
const TaskTagParams = z.object({ task_id: IdSchema, tag_id: IdSchema });

export const tagsContract = c.router(
  {
    list: {
      method: 'GET',
      path: '/tags',
      query: TagListQuerySchema,
      responses: { 200: pageOf(TagSchema) },
      summary: "List the caller's tags (admin: all), oldest first",
    },
    get: {
      method: 'GET',
      path: '/tags/:tag_id',
      pathParams: TagParams,
      responses: { 200: TagSchema, 404: ProblemSchema },
      summary: 'Get a tag',
    },
    create: {
      method: 'POST',
      path: '/tags',
      body: TagCreateSchema,
      responses: { 201: TagSchema, 409: ProblemSchema },
      summary: 'Create a tag',
    },
    update: {
      method: 'PATCH',
      path: '/tags/:tag_id',
      pathParams: TagParams,
      body: TagPatchSchema,
      responses: { 200: TagSchema, 404: ProblemSchema, 409: ProblemSchema },
      summary: 'Rename or recolour a tag',
    },
    remove: {
      method: 'DELETE',
      path: '/tags/:tag_id',
      pathParams: TagParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 404: ProblemSchema },
      summary: 'Delete a tag and remove it from every task (each such task gets a new version)',
    },
    listForTask: {
      method: 'GET',
      path: '/tasks/:task_id/tags',
      pathParams: z.object({ task_id: IdSchema }),
      responses: { 200: listOf(TagSchema), 404: ProblemSchema },
      summary: "A task's tags, ordered by name",
    },
    addToTask: {
      method: 'POST',
      path: '/tasks/:task_id/tags/:tag_id',
      pathParams: TaskTagParams,
      body: c.noBody(),
      responses: { 200: TagSchema, 201: TagSchema, 404: ProblemSchema },
      summary: "Put one of the task owner's tags on a task (201 new, 200 already there; a new link bumps the task's version)",
    },
    removeFromTask: {
      method: 'DELETE',
      path: '/tasks/:task_id/tags/:tag_id',
      pathParams: TaskTagParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 404: ProblemSchema },
      summary: "Take a tag off a task (404 when it is not on it; bumps the task's version)",
    },
  },
  { commonResponses: commonErrors },
);
