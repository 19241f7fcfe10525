import { z } from 'zod';
import {
  c,
  commonErrors,
  IdSchema,
  PaginationQuerySchema,
  pageOf,
  ProblemSchema,
  TimestampSchema,
  type Alias,
  type Named,
} from './common.js';
import { needs } from './scopes.js';
import { TagRefSchema } from './tasks.js';

/** The compact object a change adds or removes: a comment, an attachment or a relation. */
const ChangedObjectSchema = z.object({
  id: IdSchema.optional().describe('The comment or attachment'),
  filename: z.string().optional().describe("An attachment's filename, when added"),
  taskId: IdSchema.optional().describe("A relation's first task"),
  type: z.string().optional().describe("A relation's type"),
  otherTaskId: IdSchema.optional().describe("A relation's other task"),
});

/** A value a change shows: a task field's value (tags as their list), or the compact object added or removed. */
// Null rides on the string member: OpenAPI 3.0 has no null type of its own for a oneOf.
const ChangedValueSchema = z.union([
  z.string().nullable(),
  z.number(),
  z.boolean(),
  z.array(TagRefSchema),
  ChangedObjectSchema,
]);

const activityChangeSchema = z.object({
  field: z
    .string()
    .describe(
      'A field of the Task (`title`, `status`, `assigneeId`, `projectId`, `tags`, …), or what was added or removed: `comment`, `attachment`, `relation`',
    ),
  from: ChangedValueSchema.describe(
    'The value before (null: none, or the object was added). For `comment`, `{ id }`; for `attachment`, `{ id }` (plus `filename` when added); for `relation`, `{ taskId, type, otherTaskId }`',
  ),
  to: ChangedValueSchema.describe('The value after (null: none, or the object was removed), in the same shapes'),
});
export interface ActivityChange extends z.output<typeof activityChangeSchema> {}
export const ActivityChangeSchema: Named<ActivityChange> = activityChangeSchema;

const activityEntrySchema = z.object({
  id: IdSchema.describe('The id of the event that reported the change (it may have left the event log since)'),
  at: TimestampSchema.describe('When the change was made'),
  actorId: IdSchema.nullable().describe('The user whose request made it; null for the service itself'),
  type: z
    .string()
    .describe(
      'The event type that reported it: `task.created`, `task.updated`, `comment.created`, `comment.updated`, `comment.deleted`, `attachment.created`, `attachment.deleted`, `relation.created`, `relation.deleted`',
    ),
  changes: z
    .array(ActivityChangeSchema)
    .describe(
      '`task.created`: the fields set at creation (from null); `task.updated`: each field the change changed, from its value before to its value after',
    ),
});
export interface ActivityEntry extends z.output<typeof activityEntrySchema> {}
export const ActivityEntrySchema: Named<ActivityEntry> = activityEntrySchema;

const activityQuerySchema = PaginationQuerySchema.strict();
export interface ActivityQuery extends z.output<typeof activityQuerySchema> {}
export interface ActivityQueryInput extends z.input<typeof activityQuerySchema> {}
/** The schema's own type, by name (it keeps `.extend` and `.strict`). */
export interface ActivityQuerySchemaType extends Alias<typeof activityQuerySchema> {}
export const ActivityQuerySchema: ActivityQuerySchemaType = activityQuerySchema;

export const activityContract = c.router(
  {
    listForTask: {
      method: 'GET',
      metadata: needs('tasks:read'),
      path: '/tasks/:task_id/activity',
      pathParams: z.object({
        task_id: IdSchema.describe(
          "A task you own or are assigned, or one of your projects' tasks (any for an administrator); another is 404",
        ),
      }),
      query: ActivityQuerySchema,
      responses: { 200: pageOf(ActivityEntrySchema), 404: ProblemSchema },
      summary: "A task's history, newest first",
      description:
        'Every change to the task since its creation, one entry per change, newest first, keyset-paginated: its fields, tags and project ' +
        '(`task.updated`), comments and attachments (their own events; the commentCount and attachmentCount they change are not listed again). ' +
        'Kept as long as the task lives, whatever the event retention; deleted with the task. Anyone who can see the task reads it.',
    },
  },
  { commonResponses: commonErrors },
);
