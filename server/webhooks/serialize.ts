import type { Delivery, Webhook } from '@task-service/client';
import type { Selection } from 'kysely';
import type { DB } from '../db/query.js';

/** The columns a Webhook is made of, its secret (shown once, when it is created) and its scopes. */
export const webhookColumns = [
  'webhooks.id',
  'webhooks.owner_id as ownerId',
  'webhooks.url',
  'webhooks.events',
  'webhooks.description',
  'webhooks.active',
  'webhooks.disabled_reason as disabledReason',
  'webhooks.secret',
  'webhooks.scopes',
  'webhooks.created_at as createdAt',
  'webhooks.updated_at as updatedAt',
] as const;

export type WebhookRow = Selection<DB, 'webhooks', (typeof webhookColumns)[number]>;

export function serializeWebhook(row: WebhookRow): Webhook {
  return {
    id: row.id,
    ownerId: row.ownerId,
    url: row.url,
    events: row.events,
    description: row.description,
    active: row.active,
    disabledReason: row.disabledReason,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** The columns a Delivery is made of, and the event it carries (for a retry). */
export const deliveryColumns = [
  'webhook_deliveries.id',
  'webhook_deliveries.event_id as eventId',
  'webhook_deliveries.event_type as eventType',
  'webhook_deliveries.attempt',
  'webhook_deliveries.state',
  'webhook_deliveries.status_code as statusCode',
  'webhook_deliveries.error',
  'webhook_deliveries.duration_ms as durationMs',
  'webhook_deliveries.created_at as createdAt',
  'webhook_deliveries.next_attempt_at as nextAttemptAt',
] as const;

export type DeliveryRow = Selection<DB, 'webhook_deliveries', (typeof deliveryColumns)[number]>;

export function serializeDelivery(row: DeliveryRow): Delivery {
  return {
    id: row.id,
    eventId: row.eventId,
    eventType: row.eventType,
    attempt: row.attempt,
    state: row.state,
    statusCode: row.statusCode,
    error: row.error,
    durationMs: row.durationMs,
    createdAt: row.createdAt.toISOString(),
    nextAttemptAt: row.nextAttemptAt?.toISOString() ?? null,
  };
}
