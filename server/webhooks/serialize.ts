import type { Delivery, Webhook } from '@task-service/client';
import type { WebhookDelivery as DeliveryRow, Webhook as WebhookRow } from '../generated/prisma/client.js';

export type { DeliveryRow, WebhookRow };

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
