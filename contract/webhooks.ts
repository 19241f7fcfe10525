import { z } from 'zod';
import { c, commonErrors, IdSchema, PaginationQuerySchema, pageOf, ProblemSchema, storableText, TimestampSchema } from './common.js';
import { EVENT_TYPES } from './events.js';

/** An event type, or `*` for every type. */
export const WebhookEventFilterSchema = z.enum(['*', ...EVENT_TYPES] as [string, ...string[]]);

const WebhookUrlSchema = z
  .string()
  .max(2000)
  .url()
  .refine((value) => !URL.canParse(value) || /^https?:$/.test(new URL(value).protocol), 'Expected an http or https URL')
  .refine((value) => !URL.canParse(value) || (new URL(value).username === '' && new URL(value).password === ''), 'The URL must not carry credentials');
const WebhookEventsSchema = z
  .array(WebhookEventFilterSchema)
  .min(1)
  .max(20)
  .transform((events) => [...new Set(events)]);
const DescriptionSchema = storableText(z.string().max(500));

export const WebhookSchema = z.object({
  id: IdSchema,
  ownerId: IdSchema,
  url: z.string(),
  events: z.array(z.string()),
  description: z.string(),
  /** False once switched off (by its owner, or after 3 days of failed deliveries: see disabledReason). */
  active: z.boolean(),
  disabledReason: z.string().nullable(),
  createdAt: TimestampSchema,
  updatedAt: TimestampSchema,
});
export type Webhook = z.infer<typeof WebhookSchema>;

/** Only the answer to its creation carries the secret. */
export const CreatedWebhookSchema = WebhookSchema.extend({
  /** `whsec_` + base64: verifies `webhook-signature` (Standard Webhooks). Shown once: keep it. */
  secret: z.string(),
});
export type CreatedWebhook = z.infer<typeof CreatedWebhookSchema>;

export const WebhookCreateSchema = z
  .object({ url: WebhookUrlSchema, events: WebhookEventsSchema, description: DescriptionSchema.default('') })
  .strict();
export type WebhookCreate = z.infer<typeof WebhookCreateSchema>;

export const WebhookPatchSchema = z
  .object({
    url: WebhookUrlSchema.optional(),
    events: WebhookEventsSchema.optional(),
    description: DescriptionSchema.optional(),
    /** true switches a webhook back on (and forgets its failures); false switches it off. */
    active: z.boolean().optional(),
  })
  .strict();
export type WebhookPatch = z.infer<typeof WebhookPatchSchema>;

export const DeliveryStateSchema = z.enum(['pending', 'delivering', 'succeeded', 'failed']);

export const DeliverySchema = z.object({
  id: IdSchema,
  eventId: IdSchema,
  eventType: z.string(),
  /** 1 for the first attempt at an event, then 2, 3…; a manual retry is the next number. */
  attempt: z.number().int().min(1),
  state: DeliveryStateSchema,
  /** The receiver's HTTP status, when it answered. */
  statusCode: z.number().int().nullable(),
  /** Why the attempt failed (timeout, refused address, connection error, non-2xx), else null. */
  error: z.string().nullable(),
  durationMs: z.number().int().nullable(),
  createdAt: TimestampSchema,
  /** When a pending attempt is due. */
  nextAttemptAt: TimestampSchema.nullable(),
});
export type Delivery = z.infer<typeof DeliverySchema>;

export const WebhookListQuerySchema = PaginationQuerySchema.strict();
export type WebhookListQuery = z.infer<typeof WebhookListQuerySchema>;

const WebhookParams = z.object({ webhook_id: IdSchema });
const DeliveryParams = z.object({ webhook_id: IdSchema, delivery_id: IdSchema });

export const webhooksContract = c.router(
  {
    create: {
      method: 'POST',
      path: '/webhooks',
      body: WebhookCreateSchema,
      responses: { 201: CreatedWebhookSchema },
      summary: 'Register a webhook for some or all event types (the secret is in this answer only)',
      description:
        'Deliveries follow the Standard Webhooks specification: a POST of the Event as JSON with `webhook-id` (the event id), ' +
        '`webhook-timestamp` and `webhook-signature` (`v1,` + base64 HMAC-SHA256 of `id.timestamp.body` with the secret). ' +
        'A 2xx within 10 s is success; otherwise the attempt is retried with exponential backoff (WEBHOOK_RETRY_SCHEDULE, ' +
        '±20% jitter). After 3 days of failures the webhook is switched off. A webhook receives only events its owner may see. ' +
        'A URL that resolves to a loopback, private, link-local or unspecified address is 400 on `body.url`.',
    },
    list: {
      method: 'GET',
      path: '/webhooks',
      query: WebhookListQuerySchema,
      responses: { 200: pageOf(WebhookSchema) },
      summary: "List the caller's webhooks (admin: all), oldest first",
      description: 'Paginated like every list (`limit`, `cursor`, `nextCursor`, `Link`). The secret is never shown again after creation.',
    },
    get: {
      method: 'GET',
      path: '/webhooks/:webhook_id',
      pathParams: WebhookParams,
      responses: { 200: WebhookSchema, 404: ProblemSchema },
      summary: 'Get a webhook',
      description: "One of the caller's webhooks (admin: any); another user's webhook is 404. The secret is not included.",
    },
    update: {
      method: 'PATCH',
      path: '/webhooks/:webhook_id',
      pathParams: WebhookParams,
      body: WebhookPatchSchema,
      responses: { 200: WebhookSchema, 404: ProblemSchema },
      summary: 'Change a webhook, or switch it off or on',
      description: 'Merge-patch of `url`, `events`, `description` and `active`. A new `url` is checked against the SSRF guard again; switching a webhook back on clears its `disabledReason`.',
    },
    remove: {
      method: 'DELETE',
      path: '/webhooks/:webhook_id',
      pathParams: WebhookParams,
      body: c.noBody(),
      responses: { 204: c.noBody(), 404: ProblemSchema },
      summary: 'Delete a webhook with its delivery log',
      description: 'Pending deliveries are dropped with the log; 204, or 404 for an unknown or invisible webhook.',
    },
    deliveries: {
      method: 'GET',
      path: '/webhooks/:webhook_id/deliveries',
      pathParams: WebhookParams,
      query: WebhookListQuerySchema,
      responses: { 200: pageOf(DeliverySchema), 404: ProblemSchema },
      summary: "A webhook's delivery log, newest first: one entry per attempt",
      description: 'Each entry is one attempt: the event, the attempt number (from 1), the status code or error, the duration, and when the next attempt is due (null when none).',
    },
    retry: {
      method: 'POST',
      path: '/webhooks/:webhook_id/deliveries/:delivery_id/retry',
      pathParams: DeliveryParams,
      body: c.noBody(),
      responses: { 202: DeliverySchema, 404: ProblemSchema, 409: ProblemSchema },
      summary: "Deliver an attempt's event again now (202 with the new attempt; 409 while the webhook is switched off)",
      description: 'Schedules the event of a logged attempt as a new attempt due at once, with the same `webhook-id` so receivers can deduplicate it.',
    },
  },
  { commonResponses: commonErrors },
);
