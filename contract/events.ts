import { z } from 'zod';
import { EVENT_TYPES } from './event-types.js';
import { AttachmentSchema } from './attachments.js';
import { c, commonErrors, IdSchema, ProblemSchema, TimestampSchema, type Named } from './common.js';
import { MemberSchema, ProjectSchema } from './projects.js';
import { RelationTypeSchema, RelationViewSchema } from './relations.js';
import { needs } from './scopes.js';
import { TagSchema } from './tags.js';
import { CommentSchema } from './comments.js';
import { TaskBeforeSchema, TaskSchema } from './tasks.js';
import { UserSchema } from './users.js';

const eventOf = <T extends string, D extends z.ZodRawShape>(type: T, data: D) =>
  z.object({
    id: IdSchema.describe(
      "The event's id (UUIDv7): the SSE `id:` and the webhook `webhook-id`, the same on every delivery of it",
    ),
    type: z.literal(type).describe('What changed: `<resource>.created`, `.updated` or `.deleted`'),
    occurredAt: TimestampSchema.describe('When the change was made'),
    actorId: IdSchema.nullable().describe('The user whose request made the change; null for the service itself'),
    data: z.object(data).describe('The state after the change; a deletion carries only ids (a tombstone)'),
  });

/** One change, as recorded in the same transaction as the change itself. */
export const EventSchema = z.discriminatedUnion('type', [
  eventOf('task.created', { task: TaskSchema.describe('The new task') }),
  eventOf('task.updated', {
    task: TaskSchema.describe('The task after the change'),
    previous: TaskBeforeSchema.describe(
      'Only the fields the change changed, with their values before it (never `version` or `updatedAt`): what changed, without keeping a copy',
    ),
  }),
  eventOf('task.deleted', { taskId: IdSchema.describe('The deleted task') }),
  eventOf('attachment.created', { attachment: AttachmentSchema.describe('The new attachment') }),
  eventOf('attachment.deleted', {
    attachmentId: IdSchema.describe('The deleted attachment'),
    taskId: IdSchema.describe('The task it was attached to'),
  }),
  eventOf('relation.created', {
    relation: z
      .object({
        taskId: IdSchema.describe('The task it was made on'),
        type: RelationTypeSchema,
        otherTaskId: IdSchema.describe('The other task'),
      })
      .describe('The new relation, from the side of the task it was made on'),
  }),
  eventOf('relation.deleted', {
    relation: z
      .object({
        taskId: IdSchema.describe('The task it was removed from'),
        type: RelationViewSchema,
        otherTaskId: IdSchema.describe('The other task'),
      })
      .describe('The removed relation, from the side of the task it was removed from (its type as that task saw it)'),
  }),
  eventOf('comment.created', { comment: CommentSchema.describe('The new comment') }),
  eventOf('comment.updated', { comment: CommentSchema.describe('The comment after its edit') }),
  eventOf('comment.deleted', {
    commentId: IdSchema.describe('The deleted comment'),
    taskId: IdSchema.describe('The task it was on'),
  }),
  eventOf('tag.created', { tag: TagSchema.describe('The new tag') }),
  eventOf('tag.updated', { tag: TagSchema.describe('The tag after the change') }),
  eventOf('tag.deleted', { tagId: IdSchema.describe('The deleted tag') }),
  eventOf('user.updated', { user: UserSchema.describe('The account after the change') }),
  eventOf('user.deleted', { userId: IdSchema.describe('The deleted user') }),
  eventOf('project.created', { project: ProjectSchema.describe('The new project (`role` null)') }),
  eventOf('project.updated', { project: ProjectSchema.describe('The project after the change (`role` null)') }),
  eventOf('project.deleted', {
    projectId: IdSchema.describe('The deleted project: drop its tasks and tags, which went with it'),
  }),
  eventOf('project.member_added', {
    projectId: IdSchema.describe('The project'),
    member: MemberSchema.describe('The new member'),
  }),
  eventOf('project.member_updated', {
    projectId: IdSchema.describe('The project'),
    member: MemberSchema.describe('The member with their new role'),
  }),
  eventOf('project.member_removed', {
    projectId: IdSchema.describe('The project'),
    userId: IdSchema.describe('The member who left or was removed: they receive nothing more of the project'),
  }),
]);
export type Event = z.infer<typeof EventSchema>;
export type EventType = Event['type'];
export { EVENT_TYPES };
// The list the client reads at run time names exactly the events of the schema (else a type error here).
const eventTypesMatch: [EventType] extends [EventTypeListed]
  ? [EventTypeListed] extends [EventType]
    ? true
    : never
  : never = true;
type EventTypeListed = (typeof EVENT_TYPES)[number];
void eventTypesMatch;

const changesQuerySchema = z
  .object({
    limit: z.coerce.number().int().min(1).max(1000).default(100).describe('At most this many events, 1 to 1000'),
    cursor: z
      .string()
      .min(1)
      .max(512)
      .optional()
      .describe(
        "Opaque: the previous answer's `nextCursor`. Without it the feed starts at the oldest retained event; one older than the retention is 410",
      ),
  })
  .strict();
export interface ChangesQuery extends z.output<typeof changesQuerySchema> {}
export interface ChangesQueryInput extends z.input<typeof changesQuerySchema> {}
export const ChangesQuerySchema: z.ZodType<ChangesQuery, z.ZodTypeDef, ChangesQueryInput> = changesQuerySchema;

const changesPageSchema = z.object({
  items: z.array(EventSchema).describe('Events in commit order, oldest first; empty when you are up to date'),
  nextCursor: z.string().describe('Always present: keep it and ask again with it later'),
});
export interface ChangesPage extends z.output<typeof changesPageSchema> {}
export const ChangesPageSchema: Named<ChangesPage> = changesPageSchema;

export const EventStreamHeaders = z.object({
  'last-event-id': IdSchema.optional().describe(
    'Resume after this event (the `id:` of the last event received) with nothing missed; 410 when it is older than the retention, 400 when it is not one you received',
  ),
});

export const eventsContract = c.router(
  {
    changes: {
      method: 'GET',
      metadata: needs('events:read'),
      path: '/changes',
      query: ChangesQuerySchema,
      responses: { 200: ChangesPageSchema, 410: ProblemSchema },
      summary: 'Changes feed: the events the caller may see, in commit order (delta sync)',
      description:
        'Returns the events visible to the caller in commit order, oldest first, starting after `cursor` ' +
        '(or at the oldest retained event). Deletions appear as `*.deleted` events (tombstones). A transaction ' +
        'that commits late is never skipped: the feed stops before the oldest transaction still running. ' +
        '`nextCursor` is always present; an empty page means up to date. A personal access token sees only the events ' +
        'its other scopes read: `task.*`, `attachment.*`, `relation.*` and `comment.*` with `tasks:read`, `project.*` with `projects:read`, `tag.*` with `tags:read`, `user.*` with `account:read`. A cursor older than the event ' +
        'retention (`EVENT_RETENTION_DAYS`) is 410 `cursor_expired`: do a full sync.',
    },
    stream: {
      method: 'GET',
      metadata: needs('events:read'),
      path: '/events',
      headers: EventStreamHeaders,
      // The body is a stream of `text/event-stream` frames, not one value.
      responses: { 200: c.otherResponse({ contentType: 'text/event-stream', body: z.unknown() }), 410: ProblemSchema },
      summary: 'Live stream of events (Server-Sent Events)',
      description:
        'Answers `text/event-stream` at once with the events the caller may see that commit after the ' +
        'stream opened: `id:` the event id, `event:` its type, `data:` the whole Event as JSON. A comment ' +
        'line every 15 s keeps proxies open. Send `Last-Event-ID` to resume after that event with nothing ' +
        'missed (410 `cursor_expired` when it is no longer retained, 400 when it is not one you received). The stream ends when the session ends. ' +
        'A personal access token receives only the events its other scopes read, as on `GET /changes`.',
    },
  },
  { commonResponses: commonErrors },
);
