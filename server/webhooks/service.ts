import { randomBytes } from 'node:crypto';
import { recordingEvents } from '../events/signal.js';
import { v7 as uuidv7 } from 'uuid';
import {
  grantsScope,
  SCOPES,
  type Delivery,
  type Scope,
  type Webhook,
  type WebhookCreate,
  type WebhookListQuery,
  type WebhookPatch,
} from '@task-service/client';
import type { ExpressionBuilder } from 'kysely';
import type { AppContext } from '../context.js';
import { AppError, invalidField, notFound } from '../http/errors.js';
import { createdAfterId, creationCursor, toPage, type ListExchange, type Page } from '../http/pagination.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { withinQuota } from '../quotas.js';
import { tables, type DB } from '../db/query.js';
import { lockAttemptsOf } from './attempts.js';
import { webhookNetwork } from './network.js';
import {
  deliveryColumns,
  serializeDelivery,
  serializeWebhook,
  webhookColumns,
  type DeliveryRow,
  type WebhookRow,
} from './serialize.js';
import { resolveTarget } from './targets.js';
import { scopesOf } from '../tokens/serialize.js';

/** Admins see every webhook, others their own. */
const webhookVisibleTo = (principal: Principal) => (eb: ExpressionBuilder<DB, 'webhooks'>) =>
  isAdmin(principal) ? eb.lit(true) : eb('webhooks.owner_id', '=', principal.userId);

/** What the caller's credential may do: a personal access token's scopes, or every scope for a login. */
const scopesOfCaller = (principal: Principal): readonly Scope[] => principal.token?.scopes ?? SCOPES;

/** The scopes both sets grant, written out (`tasks:write` granting `tasks:read` lists both). */
const commonScopes = (a: readonly Scope[], b: readonly Scope[]): Scope[] =>
  SCOPES.filter((scope) => grantsScope(a, scope) && grantsScope(b, scope));

/** A signing secret as Standard Webhooks writes it: `whsec_` + base64 of 32 random bytes. */
const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

/**
 * Refuses a target any address of which is not global unicast, or is the service's own. A name
 * that does not resolve now is accepted: every delivery checks again. The message never says what
 * the name resolved to (that would let anyone read the service's DNS view).
 */
async function assertAllowedTarget(ctx: AppContext, url: string): Promise<void> {
  if (ctx.config.webhooks.allowPrivateTargets) return;
  const target = await resolveTarget(new URL(url), webhookNetwork(ctx)).catch(() => undefined);
  if (target && !target.allowed) {
    throw invalidField(
      'body.url',
      'refused_target',
      'Webhooks may only target public addresses: this host is, or resolves to, an address that is not global unicast (private, loopback, link-local, ' +
        'shared, documentation, benchmarking, multicast, reserved, or this service itself)',
    );
  }
}

export async function createWebhook(
  ctx: AppContext,
  principal: Principal,
  input: WebhookCreate,
): Promise<Webhook & { secret: string }> {
  await assertAllowedTarget(ctx, input.url);
  const now = new Date();
  const row = await withinQuota(ctx, principal, 'webhooks', async (tx) => {
    const created = await tx.first(
      tables
        .insertInto('webhooks')
        .values({
          id: uuidv7(),
          owner_id: principal.userId,
          url: input.url,
          events: input.events,
          description: input.description,
          // It delivers what the credential that made it could read, no more, as /changes shows a token.
          scopes: [...scopesOfCaller(principal)],
          secret: newSecret(),
          created_at: now,
          updated_at: now,
        })
        .returning(webhookColumns),
    );
    if (!created) throw new Error('INSERT … RETURNING answered no row');
    return created;
  });
  return { ...serializeWebhook(row), secret: row.secret };
}

export async function listWebhooks(
  ctx: AppContext,
  principal: Principal,
  query: WebhookListQuery,
  http: ListExchange,
): Promise<Page<Webhook>> {
  const after = createdAfterId(ctx.cursors, query.cursor);
  const visible = tables.selectFrom('webhooks').select(webhookColumns).where(webhookVisibleTo(principal));
  const rows = await ctx.db.sql.all(
    (after ? visible.where('webhooks.id', '>', after) : visible).orderBy('webhooks.id').limit(query.limit + 1),
  );
  return toPage(ctx.cursors, http, rows, query.limit, creationCursor, serializeWebhook);
}

/** A webhook the caller may see, or 404. */
export async function findVisibleWebhook(
  ctx: AppContext,
  principal: Principal,
  webhookId: string,
): Promise<WebhookRow> {
  const row = await ctx.db.sql.first(
    tables
      .selectFrom('webhooks')
      .select(webhookColumns)
      .where('webhooks.id', '=', webhookId)
      .where(webhookVisibleTo(principal)),
  );
  if (!row) throw notFound('webhook');
  return row;
}

export async function updateWebhook(
  ctx: AppContext,
  principal: Principal,
  webhookId: string,
  change: WebhookPatch,
): Promise<WebhookRow> {
  const webhook = await findVisibleWebhook(ctx, principal, webhookId);
  if (change.url !== undefined) await assertAllowedTarget(ctx, change.url);
  const updated = await ctx.db.sql.first(
    tables
      .updateTable('webhooks')
      .set({
        ...(change.url !== undefined && { url: change.url }),
        ...(change.events !== undefined && { events: change.events }),
        ...(change.description !== undefined && { description: change.description }),
        // A token that points the webhook elsewhere, or at more events, must not receive through it
        // what it could not read itself.
        ...(principal.token &&
          (change.url !== undefined || change.events !== undefined) && {
            scopes: commonScopes(scopesOf(webhook.scopes), principal.token.scopes),
          }),
        // Switching on forgets the failures; switching off is the owner's own reason.
        ...(change.active === true && { active: true, disabled_reason: null, failing_since: null }),
        ...(change.active === false && { active: false, disabled_reason: 'switched off by its owner' }),
        updated_at: new Date(),
      })
      .where('webhooks.id', '=', webhook.id)
      .returning(webhookColumns),
  );
  if (!updated) throw notFound('webhook');
  return updated;
}

export async function deleteWebhook(ctx: AppContext, principal: Principal, webhookId: string): Promise<void> {
  const webhook = await findVisibleWebhook(ctx, principal, webhookId);
  // Its deliveries go with it (cascade) and may be row-locked by a delivery worker: a deadlock runs again.
  await ctx.db.sql.transaction((tx) => tx.write(tables.deleteFrom('webhooks').where('id', '=', webhook.id)));
}

/** Newest first: ids are UUIDv7, so descending id order is newest first. */
export async function listDeliveries(
  ctx: AppContext,
  principal: Principal,
  webhookId: string,
  query: WebhookListQuery,
  http: ListExchange,
): Promise<Page<Delivery>> {
  const webhook = await findVisibleWebhook(ctx, principal, webhookId);
  const before = createdAfterId(ctx.cursors, query.cursor);
  const attempts = tables
    .selectFrom('webhook_deliveries')
    .select(deliveryColumns)
    .where('webhook_deliveries.webhook_id', '=', webhook.id);
  const rows = await ctx.db.sql.all(
    (before ? attempts.where('webhook_deliveries.id', '<', before) : attempts)
      .orderBy('webhook_deliveries.id', 'desc')
      .limit(query.limit + 1),
  );
  return toPage(ctx.cursors, http, rows, query.limit, creationCursor, serializeDelivery);
}

/**
 * Delivers the event of a logged attempt again, now. One attempt at a time per event: a pending
 * automatic retry is brought forward (it becomes this attempt, never a second one); with none
 * pending the next attempt number is scheduled. While an attempt of the event is in flight or
 * already due, the answer is 409, so concurrent retries make one attempt between them.
 */
export async function retryDelivery(
  ctx: AppContext,
  principal: Principal,
  webhookId: string,
  deliveryId: string,
): Promise<DeliveryRow> {
  const webhook = await findVisibleWebhook(ctx, principal, webhookId);
  if (!webhook.active)
    throw new AppError('conflict', 'The webhook is switched off: switch it on (PATCH active: true) first');
  const delivery = await ctx.db.sql.first(
    tables
      .selectFrom('webhook_deliveries')
      .select(deliveryColumns)
      .where('webhook_deliveries.id', '=', deliveryId)
      .where('webhook_deliveries.webhook_id', '=', webhook.id),
  );
  if (!delivery) throw notFound('delivery');
  // Announced once committed: that wakes the delivery workers.
  return recordingEvents(ctx, async (tx) => {
    await lockAttemptsOf(tx, webhook.id, delivery.eventId);
    const attempts = await tx.all(
      tables
        .selectFrom('webhook_deliveries')
        .select(deliveryColumns)
        .where('webhook_deliveries.webhook_id', '=', webhook.id)
        .where('webhook_deliveries.event_id', '=', delivery.eventId)
        .orderBy('webhook_deliveries.attempt', 'desc'),
    );
    const now = new Date();
    const open = attempts.find((a) => a.state === 'pending' || a.state === 'delivering');
    if (open && (open.state === 'delivering' || (open.nextAttemptAt ?? now) <= now)) {
      throw new AppError(
        'conflict',
        `Attempt ${open.attempt} of this event is already ${open.state === 'delivering' ? 'in flight' : 'due'}: its outcome will be in the log`,
      );
    }
    const retry = await tx.first(
      open
        ? tables
            .updateTable('webhook_deliveries')
            .set({ next_attempt_at: now })
            .where('webhook_deliveries.id', '=', open.id)
            .returning(deliveryColumns)
        : tables
            .insertInto('webhook_deliveries')
            .values({
              id: uuidv7(),
              webhook_id: webhook.id,
              event_id: delivery.eventId,
              event_type: delivery.eventType,
              attempt: (attempts[0]?.attempt ?? 0) + 1,
              next_attempt_at: now,
            })
            .returning(deliveryColumns),
    );
    // Locked with its event's attempts, the attempt updated cannot have gone; a cascade can take both.
    if (!retry) throw notFound('delivery');
    return retry;
  });
}
