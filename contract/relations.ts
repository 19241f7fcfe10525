import { z } from 'zod';
import { c, commonErrors, IdSchema, listOf, ProblemSchema, type Named } from './common.js';
import { needs } from './scopes.js';
import { TaskStatusSchema } from './tasks.js';

/** What a relation says, as made: the first task blocks, relates to or duplicates the other. */
export const RelationTypeSchema = z
  .enum(['blocks', 'relates_to', 'duplicates'])
  .describe('`blocks` (the other task is blocked until this one is done), `relates_to` or `duplicates`');
export type RelationType = z.infer<typeof RelationTypeSchema>;

/** A relation seen from one of its tasks: the types as made, and their inverses seen from the other side. */
export const RelationViewSchema = z
  .enum(['blocks', 'blocked_by', 'relates_to', 'duplicates', 'duplicated_by'])
  .describe(
    'Seen from this task: `blocks`, `blocked_by`, `relates_to` (the same from both sides), `duplicates` or `duplicated_by`',
  );
export type RelationView = z.infer<typeof RelationViewSchema>;

/** The most relations one task takes part in, either side: the list of a task's relations has no pages. */
export const MAX_RELATIONS_PER_TASK = 500;

const relationSchema = z.object({
  type: RelationViewSchema,
  task: z
    .object({
      id: IdSchema.describe('The other task'),
      title: z.string().describe("The other task's title"),
      status: TaskStatusSchema,
    })
    .describe('The other task'),
});
export interface Relation extends z.output<typeof relationSchema> {}
export const RelationSchema: Named<Relation> = relationSchema;

const relationCreateSchema = z
  .object({
    type: RelationTypeSchema,
    taskId: IdSchema.describe('The other task: one you see, not this one'),
  })
  .strict();
export interface RelationCreate extends z.output<typeof relationCreateSchema> {}
export interface RelationCreateInput extends z.input<typeof relationCreateSchema> {}
export const RelationCreateSchema: z.ZodType<RelationCreate, z.ZodTypeDef, RelationCreateInput> = relationCreateSchema;

const TaskParams = z.object({
  task_id: IdSchema.describe(
    "A task you own or are assigned, or one of your projects' tasks (any for an administrator); another is 404",
  ),
});

const RelationParams = TaskParams.extend({
  type: RelationViewSchema,
  other_id: IdSchema.describe('The other task of the relation'),
});

export const relationsContract = c.router(
  {
    list: {
      method: 'GET',
      metadata: needs('tasks:read'),
      path: '/tasks/:task_id/relations',
      pathParams: TaskParams,
      responses: { 200: listOf(RelationSchema), 404: ProblemSchema },
      summary: "List a task's relations, seen from this task",
      description: `Every relation the task takes part in (at most ${MAX_RELATIONS_PER_TASK}, so the list has no pages), with the type seen from this task: a \`blocks\` made on another task reads \`blocked_by\` here, \`duplicates\` reads \`duplicated_by\`, \`relates_to\` reads the same. Only relations to tasks you see are listed.`,
    },
    create: {
      method: 'POST',
      metadata: needs('tasks:write'),
      path: '/tasks/:task_id/relations',
      pathParams: TaskParams,
      body: RelationCreateSchema,
      responses: {
        200: RelationSchema,
        201: RelationSchema,
        403: ProblemSchema,
        404: ProblemSchema,
        409: ProblemSchema,
      },
      summary: 'Relate a task to another (201; 200 when the relation already existed)',
      description: `Makes this task block, relate to or duplicate \`taskId\`. You must be able to change this task (its owner or assignee, an editor or admin of its project; else 403) and see the other (else 400 on \`body.taskId\`). A task does not relate to itself, and \`blocks\` never makes a cycle (400). A task takes part in at most ${MAX_RELATIONS_PER_TASK} relations (409 \`conflict\`). A \`blocks\` from a task that is not done makes the other task \`blocked\`.`,
    },
    remove: {
      method: 'DELETE',
      metadata: needs('tasks:write'),
      path: '/tasks/:task_id/relations/:type/:other_id',
      pathParams: RelationParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 403: ProblemSchema, 404: ProblemSchema },
      summary: 'Remove a relation (the type as this task sees it)',
      description:
        "Removes the relation between this task and `other_id`, named by its type as `GET /tasks/{task_id}/relations` shows it (`blocked_by` removes the other task's `blocks`). 404 when there is no such relation; 403 when you may not change this task.",
    },
  },
  { commonResponses: commonErrors },
);
