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
import type { AppContext } from '../context.js';
import type { Prisma } from '../generated/prisma/client.js';
import { AppError, invalidField, notFound } from '../http/errors.js';
import { createdAfter, creationCursor, toPage, type ListExchange, type Page } from '../http/pagination.js';
import { isAdmin, type Principal } from '../http/principal.js';
import { inTransaction } from '../db/transactions.js';
import { withinQuota } from '../quotas.js';
import { tables } from '../db/query.js';
import { lockAttemptsOf } from './attempts.js';
import { webhookNetwork } from './network.js';
import { serializeDelivery, serializeWebhook, webhookColumns, type DeliveryRow, type WebhookRow } from './serialize.js';
import { resolveTarget } from './targets.js';
import { scopesOf } from '../tokens/serialize.js';

/** Admins see every webhook, others their own. */
const webhookVisibleTo = (principal: Principal): Prisma.WebhookWhereInput =>
  isAdmin(principal) ? {} : { ownerId: principal.userId };

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
  const rows = await ctx.db.prisma.webhook.findMany({
    where: { AND: [webhookVisibleTo(principal), ...createdAfter(ctx.cursors, query.cursor)] },
    orderBy: { id: 'asc' },
    take: query.limit + 1,
  });
  return toPage(ctx.cursors, http, rows, query.limit, creationCursor, serializeWebhook);
}

/** A webhook the caller may see, or 404. */
export async function findVisibleWebhook(
  ctx: AppContext,
  principal: Principal,
  webhookId: string,
): Promise<WebhookRow> {
  const row = await ctx.db.prisma.webhook.findFirst({
    where: { AND: [{ id: webhookId }, webhookVisibleTo(principal)] },
  });
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
  const { count } = await ctx.db.prisma.webhook.updateMany({
    where: { id: webhook.id },
    data: {
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
      ...(change.active === true && { active: true, disabledReason: null, failingSince: null }),
      ...(change.active === false && { active: false, disabledReason: 'switched off by its owner' }),
      updatedAt: new Date(),
    },
  });
  if (count === 0) throw notFound('webhook');
  return findVisibleWebhook(ctx, principal, webhookId);
}

export async function deleteWebhook(ctx: AppContext, principal: Principal, webhookId: string): Promise<void> {
  const webhook = await findVisibleWebhook(ctx, principal, webhookId);
  // Its deliveries go with it (cascade) and may be row-locked by a delivery worker: a deadlock runs again.
  await inTransaction(ctx.db.prisma, (tx) => tx.webhook.deleteMany({ where: { id: webhook.id } }));
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
  const before = createdAfter(ctx.cursors, query.cursor).map(({ id }) => ({ id: { lt: id.gt } }));
  const rows = await ctx.db.prisma.webhookDelivery.findMany({
    where: { AND: [{ webhookId: webhook.id }, ...before] },
    orderBy: { id: 'desc' },
    take: query.limit + 1,
  });
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
  const delivery = await ctx.db.prisma.webhookDelivery.findFirst({ where: { id: deliveryId, webhookId: webhook.id } });
  if (!delivery) throw notFound('delivery');
  // Announced once committed: that wakes the delivery workers.
  return recordingEvents(ctx, async (tx) => {
    await lockAttemptsOf(tx, webhook.id, delivery.eventId);
    const attempts = await tx.webhookDelivery.findMany({
      where: { webhookId: webhook.id, eventId: delivery.eventId },
      orderBy: { attempt: 'desc' },
    });
    const now = new Date();
    const open = attempts.find((a) => a.state === 'pending' || a.state === 'delivering');
    if (open && (open.state === 'delivering' || (open.nextAttemptAt ?? now) <= now)) {
      throw new AppError(
        'conflict',
        `Attempt ${open.attempt} of this event is already ${open.state === 'delivering' ? 'in flight' : 'due'}: its outcome will be in the log`,
      );
    }
    const retry = open
      ? await tx.webhookDelivery.update({ where: { id: open.id }, data: { nextAttemptAt: now } })
      : await tx.webhookDelivery.create({
          data: {
            id: uuidv7(),
            webhookId: webhook.id,
            eventId: delivery.eventId,
            eventType: delivery.eventType,
            attempt: (attempts[0]?.attempt ?? 0) + 1,
            nextAttemptAt: now,
          },
        });
    return retry;
  });
}
