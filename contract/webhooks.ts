import { z } from 'zod';
import {
  boundedArray,
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
import { EVENT_TYPES } from './events.js';

/** An event type, or `*` for every type. */
export const WebhookEventFilterSchema = z
  .enum(['*', ...EVENT_TYPES] as [string, ...string[]])
  .describe('An event type, or `*` for every type');

export const WebhookUrlSchema = z
  .string()
  .max(2000)
  .url()
  .refine((value) => !URL.canParse(value) || /^https?:$/.test(new URL(value).protocol), 'Expected an http or https URL')
  .refine(
    (value) => !URL.canParse(value) || (new URL(value).username === '' && new URL(value).password === ''),
    'The URL must not carry credentials',
  )
  .describe(
    'Where deliveries are POSTed: http or https, without credentials, up to 2000 characters. A host that is, or resolves to, any address that is not global unicast (loopback, private, link-local, shared, documentation, benchmarking, multicast, reserved…, in any spelling) or that is the service itself is 400',
  );
const WebhookEventsSchema = boundedArray(WebhookEventFilterSchema, 20, 1)
  .transform((events) => [...new Set(events)])
  .describe('The event types to deliver (1 to 20, duplicates dropped), or `["*"]` for all');
const DescriptionSchema = storableText(z.string().max(500)).describe('A note for yourself, up to 500 characters');

const webhookSchema = z.object({
  id: IdSchema.describe("The webhook's id (UUIDv7)"),
  ownerId: IdSchema.describe('The user who registered it; it receives only events this user may see'),
  url: z.string().describe('Where deliveries are POSTed'),
  events: z.array(z.string()).describe('The event types delivered, or `["*"]` for all'),
  description: z.string().describe('The note given at registration; empty when none'),
  active: z
    .boolean()
    .describe('False once switched off, by its owner or after 3 days of failed deliveries (see disabledReason)'),
  disabledReason: z
    .string()
    .nullable()
    .describe('Why it is switched off (by its owner, or after 3 days of failed deliveries); null while active'),
  createdAt: TimestampSchema.describe('When it was registered'),
  updatedAt: TimestampSchema.describe('When it last changed'),
});
export interface Webhook extends z.output<typeof webhookSchema> {}
/** The schema's own type, by name (it keeps `.extend` and `.strict`). */
export interface WebhookSchemaType extends Alias<typeof webhookSchema> {}
export const WebhookSchema: WebhookSchemaType = webhookSchema;

/** Only the answer to its creation carries the secret. */
const createdWebhookSchema = WebhookSchema.extend({
  secret: z
    .string()
    .describe(
      '`whsec_` + base64: verifies `webhook-signature` (Standard Webhooks). Shown only in this answer: keep it',
    ),
});
export interface CreatedWebhook extends z.output<typeof createdWebhookSchema> {}
export const CreatedWebhookSchema: Named<CreatedWebhook> = createdWebhookSchema;

const webhookCreateSchema = z
  .object({ url: WebhookUrlSchema, events: WebhookEventsSchema, description: DescriptionSchema.default('') })
  .strict();
export interface WebhookCreate extends z.output<typeof webhookCreateSchema> {}
export interface WebhookCreateInput extends z.input<typeof webhookCreateSchema> {}
export const WebhookCreateSchema: z.ZodType<WebhookCreate, z.ZodTypeDef, WebhookCreateInput> = webhookCreateSchema;

const webhookPatchSchema = z
  .object({
    url: WebhookUrlSchema.optional(),
    events: WebhookEventsSchema.optional(),
    description: DescriptionSchema.optional(),
    active: z
      .boolean()
      .optional()
      .describe(
        'true switches the webhook back on (forgetting its failures and disabledReason); false switches it off',
      ),
  })
  .strict();
export interface WebhookPatch extends z.output<typeof webhookPatchSchema> {}
export interface WebhookPatchInput extends z.input<typeof webhookPatchSchema> {}
export const WebhookPatchSchema: z.ZodType<WebhookPatch, z.ZodTypeDef, WebhookPatchInput> = webhookPatchSchema;

export const DeliveryStateSchema = z
  .enum(['pending', 'delivering', 'succeeded', 'failed'])
  .describe('`pending` (due at nextAttemptAt), `delivering` (in flight), `succeeded` (a 2xx) or `failed`');

const deliverySchema = z.object({
  id: IdSchema.describe("The attempt's id (UUIDv7)"),
  eventId: IdSchema.describe('The event delivered (its `webhook-id`)'),
  eventType: z.string().describe('The type of that event'),
  attempt: z
    .number()
    .int()
    .min(1)
    .describe('1 for the first attempt at an event, then 2, 3…; a manual retry is the next number'),
  state: DeliveryStateSchema,
  statusCode: z
    .number()
    .int()
    .nullable()
    .describe("The receiver's HTTP status; null when it did not answer or the attempt has not run"),
  error: z
    .string()
    .nullable()
    .describe('Why the attempt failed (timeout, refused address, connection error, non-2xx status); null otherwise'),
  durationMs: z.number().int().nullable().describe('How long the attempt took, in milliseconds; null until it has run'),
  createdAt: TimestampSchema.describe('When the attempt was scheduled'),
  nextAttemptAt: TimestampSchema.nullable().describe('When a pending attempt is due; null when none is'),
});
export interface Delivery extends z.output<typeof deliverySchema> {}
export const DeliverySchema: Named<Delivery> = deliverySchema;

const webhookListQuerySchema = PaginationQuerySchema.strict();
export interface WebhookListQuery extends z.output<typeof webhookListQuerySchema> {}
export interface WebhookListQueryInput extends z.input<typeof webhookListQuerySchema> {}
export const WebhookListQuerySchema: z.ZodType<WebhookListQuery, z.ZodTypeDef, WebhookListQueryInput> =
  webhookListQuerySchema;

const WebhookIdSchema = IdSchema.describe('One of your webhooks (any for an administrator); another is 404');
const WebhookParams = z.object({ webhook_id: WebhookIdSchema });
const DeliveryParams = z.object({
  webhook_id: WebhookIdSchema,
  delivery_id: IdSchema.describe("An attempt in that webhook's delivery log"),
});

export const webhooksContract = c.router(
  {
    create: {
      method: 'POST',
      metadata: needs('webhooks:write'),
      path: '/webhooks',
      body: WebhookCreateSchema,
      responses: { 201: CreatedWebhookSchema, 409: ProblemSchema },
      summary: 'Register a webhook for some or all event types (the secret is in this answer only)',
      description:
        'Deliveries follow the Standard Webhooks specification: a POST of the Event as JSON with `webhook-id` (the event id), ' +
        '`webhook-timestamp` and `webhook-signature` (`v1,` + base64 HMAC-SHA256 of `id.timestamp.body` with the secret). ' +
        'A 2xx within 10 s is success; otherwise the attempt is retried with exponential backoff (WEBHOOK_RETRY_SCHEDULE, ' +
        '±20% jitter). After 3 days of failures the webhook is switched off. A webhook receives only events its owner may see, ' +
        'and of those only what the scopes of the personal access token that created it read (`task.*` and `attachment.*` need `tasks:read`, `tag.*` `tags:read`, `user.*` `account:read`; a login: all). ' +
        'A URL whose host is, or resolves to, an address that is not global unicast, or the service itself, is 400 on `body.url` (checked again before every delivery). ' +
        'A name that does not resolve is accepted; one under `.invalid` (RFC 6761) is never looked up, so its attempts fail at once without any traffic. ' +
        'Each user holds at most USER_MAX_WEBHOOKS webhooks (409 `quota_exceeded`; admins exempt).',
    },
    list: {
      method: 'GET',
      metadata: needs('webhooks:read'),
      path: '/webhooks',
      query: WebhookListQuerySchema,
      responses: { 200: pageOf(WebhookSchema) },
      summary: "List the caller's webhooks (admin: all), oldest first",
      description:
        'Paginated like every list (`limit`, `cursor`, `nextCursor`, `Link`). The secret is never shown again after creation.',
    },
    get: {
      method: 'GET',
      metadata: needs('webhooks:read'),
      path: '/webhooks/:webhook_id',
      pathParams: WebhookParams,
      responses: { 200: WebhookSchema, 404: ProblemSchema },
      summary: 'Get a webhook',
      description:
        "One of the caller's webhooks (admin: any); another user's webhook is 404. The secret is not included.",
    },
    update: {
      method: 'PATCH',
      metadata: needs('webhooks:write'),
      path: '/webhooks/:webhook_id',
      pathParams: WebhookParams,
      body: WebhookPatchSchema,
      responses: { 200: WebhookSchema, 404: ProblemSchema },
      summary: 'Change a webhook, or switch it off or on',
      description:
        'Merge-patch of `url`, `events`, `description` and `active`. A new `url` is checked against the SSRF guard again; switching a webhook back on clears its `disabledReason`. ' +
        'A personal access token that changes `url` or `events` narrows the event scopes of the webhook to its own.',
    },
    remove: {
      method: 'DELETE',
      metadata: needs('webhooks:write'),
      path: '/webhooks/:webhook_id',
      pathParams: WebhookParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 404: ProblemSchema },
      summary: 'Delete a webhook with its delivery log',
      description: 'Pending deliveries are dropped with the log; 204, or 404 for an unknown or invisible webhook.',
    },
    deliveries: {
      method: 'GET',
      metadata: needs('webhooks:read'),
      path: '/webhooks/:webhook_id/deliveries',
      pathParams: WebhookParams,
      query: WebhookListQuerySchema,
      responses: { 200: pageOf(DeliverySchema), 404: ProblemSchema },
      summary: "A webhook's delivery log, newest first: one entry per attempt",
      description:
        'Each entry is one attempt: the event, the attempt number (from 1), the status code or error, the duration, and when the next attempt is due (null when none).',
    },
    retry: {
      method: 'POST',
      metadata: needs('webhooks:write'),
      path: '/webhooks/:webhook_id/deliveries/:delivery_id/retry',
      pathParams: DeliveryParams,
      body: c.noBody(),
      responses: { 202: DeliverySchema, 404: ProblemSchema, 409: ProblemSchema },
      summary:
        "Deliver an attempt's event again now (202 with the attempt; 409 while one is in flight or due, or the webhook is switched off)",
      description:
        'Delivers the event of a logged attempt again, at once, with the same `webhook-id` so receivers can deduplicate it. An event has one attempt at a time: ' +
        'a pending automatic retry is brought forward (the answer is that attempt), else the next attempt number is scheduled. While an attempt of the event ' +
        'is in flight or already due the answer is 409 `conflict`, so concurrent retries make one attempt between them.',
    },
  },
  { commonResponses: commonErrors },
);
