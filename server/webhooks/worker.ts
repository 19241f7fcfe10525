import { v7 as uuidv7 } from 'uuid';
import type { AppContext } from '../context.js';
import { sql } from 'kysely';
import { tables } from '../db/query.js';
import { eventSeenBy, projectsOfReaders, readableEvent } from '../events/log.js';
import { eventMetrics } from '../events/metrics.js';
import { eventSignal } from '../events/signal.js';
import { claimFairly, type Claimed } from './claims.js';
import { lockAttemptsOf } from './attempts.js';
import { webhookNetwork } from './network.js';
import { sendEvent, type AttemptResult } from './send.js';

const SWITCH_OFF_AFTER_MS = 3 * 24 * 3600 * 1000;
const MAX_SLEEP_MS = 5_000;
/** While due attempts wait for a host's or a user's slot held on another instance, look again this often. */
const BLOCKED_POLL_MS = 500;

/** ±20% around the scheduled delay, so that receivers coming back are not hit by everyone at once. */
const jittered = (seconds: number) => seconds * 1000 * (0.8 + Math.random() * 0.4);

/** Records an attempt's outcome; a failure schedules the next attempt or switches the webhook off. */
async function finish(
  ctx: AppContext,
  claimed: Claimed,
  leaseId: string,
  result: AttemptResult,
  retry: boolean,
): Promise<void> {
  const schedule = ctx.config.webhooks.retryScheduleSeconds;
  await ctx.db.sql.transaction(async (tx) => {
    // First the event's attempts (as a manual retry takes it), so that numbers are given out one at a time.
    await lockAttemptsOf(tx, claimed.webhookId, claimed.eventId);
    const delivery = await tx.first(
      tables
        .selectFrom('webhook_deliveries')
        .select([
          'webhook_deliveries.id',
          'webhook_deliveries.webhook_id as webhookId',
          'webhook_deliveries.event_id as eventId',
          'webhook_deliveries.event_type as eventType',
          'webhook_deliveries.attempt',
          'webhook_deliveries.state',
          'webhook_deliveries.lease_id as leaseId',
        ])
        .where('webhook_deliveries.id', '=', claimed.id),
    );
    if (!delivery || delivery.leaseId !== leaseId || delivery.state !== 'delivering') return; // another instance took it over
    await tx.write(
      tables
        .updateTable('webhook_deliveries')
        .set({
          state: result.ok ? 'succeeded' : 'failed',
          status_code: result.statusCode,
          error: result.error,
          duration_ms: result.durationMs,
          next_attempt_at: null,
          lease_id: null,
          lease_until: null,
        })
        .where('webhook_deliveries.id', '=', delivery.id),
    );
    if (!retry) return;
    const webhook = await tx.first(
      tables
        .selectFrom('webhooks')
        .select(['webhooks.failing_since as failingSince', 'webhooks.active'])
        .where('webhooks.id', '=', delivery.webhookId)
        .forUpdate(),
    );
    if (!webhook) return;
    const setWebhook = tables.updateTable('webhooks').where('webhooks.id', '=', delivery.webhookId);
    const now = new Date();
    if (result.ok) {
      if (webhook.failingSince) await tx.write(setWebhook.set({ failing_since: null }));
      return;
    }
    const failingSince = webhook.failingSince ?? now;
    if (now.getTime() - failingSince.getTime() >= SWITCH_OFF_AFTER_MS) {
      await tx.write(
        setWebhook.set({
          active: false,
          disabled_reason: `every delivery failed for 3 days (since ${failingSince.toISOString()}); the last: ${result.error ?? 'failed'}`,
          updated_at: now,
        }),
      );
      return;
    }
    if (!webhook.failingSince) await tx.write(setWebhook.set({ failing_since: failingSince }));
    const delay = schedule[delivery.attempt - 1];
    if (delay === undefined || !webhook.active) return; // the schedule is spent: the log keeps the failure
    const attempts = await tx.all(
      tables
        .selectFrom('webhook_deliveries')
        .select(['webhook_deliveries.attempt', 'webhook_deliveries.state'])
        .where('webhook_deliveries.webhook_id', '=', delivery.webhookId)
        .where('webhook_deliveries.event_id', '=', delivery.eventId),
    );
    if (attempts.some((a) => a.state === 'pending' || a.state === 'delivering')) return; // one attempt at a time per event
    await tx.write(
      tables.insertInto('webhook_deliveries').values({
        id: uuidv7(),
        webhook_id: delivery.webhookId,
        event_id: delivery.eventId,
        event_type: delivery.eventType,
        attempt: Math.max(...attempts.map((a) => a.attempt)) + 1,
        next_attempt_at: new Date(now.getTime() + jittered(delay)),
      }),
    );
  });
}

async function attempt(ctx: AppContext, claimed: Claimed, leaseId: string, signal: AbortSignal): Promise<void> {
  const delivery = await ctx.db.sql.first(
    tables
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhooks as w', 'w.id', 'd.webhook_id')
      .innerJoin('users as owner', 'owner.id', 'w.owner_id')
      .innerJoin('events as e', 'e.id', 'd.event_id')
      .select([
        'd.id',
        'd.webhook_id as webhookId',
        'd.attempt',
        'w.active',
        'w.owner_id as ownerId',
        'w.url',
        'w.secret',
        'owner.role as ownerRole',
        'e.id as eventId',
        'e.type as eventType',
        'e.occurred_at as occurredAt',
        'e.actor_id as actorId',
        'e.data',
        'e.audience',
        'e.project_id as projectId',
      ])
      .where('d.id', '=', claimed.id),
  );
  if (!delivery) return;
  const metrics = eventMetrics(ctx);
  const failed = (result: AttemptResult) =>
    ctx.logger.warn(
      {
        webhookId: delivery.webhookId,
        deliveryId: delivery.id,
        attempt: delivery.attempt,
        reason: result.error,
        statusCode: result.statusCode,
      },
      'webhook delivery attempt failed',
    );
  if (!delivery.active) {
    const result = { ok: false, statusCode: null, error: 'the webhook is switched off', durationMs: 0 };
    failed(result);
    await finish(ctx, claimed, leaseId, result, false);
    return;
  }
  const { allowPrivateTargets, timeoutMs } = ctx.config.webhooks;
  // The owner's role now, as the live stream decides it per event.
  const owner = { userId: delivery.ownerId, admin: delivery.ownerRole === 'admin' };
  const stored = readableEvent(
    ctx,
    {
      id: delivery.eventId,
      type: delivery.eventType,
      occurredAt: delivery.occurredAt,
      actorId: delivery.actorId,
      data: delivery.data,
    },
    'webhook',
  );
  if (!stored) {
    // Sending it again would fail the same way: the attempt fails once, without retries.
    const result = {
      ok: false,
      statusCode: null,
      error: 'the event does not read as the contract says',
      durationMs: 0,
    };
    failed(result);
    await finish(ctx, claimed, leaseId, result, false);
    return;
  }
  // Visibility as of now, as the live stream decides it: an owner removed from the event's project
  // since it happened receives nothing more of it.
  if (!owner.admin && !delivery.audience.includes(owner.userId)) {
    const projects = await projectsOfReaders(ctx, [owner.userId], delivery.projectId ? [delivery.projectId] : []);
    if (!delivery.projectId || !projects.get(owner.userId)?.has(delivery.projectId)) {
      const result = {
        ok: false,
        statusCode: null,
        error: "the webhook's owner no longer sees this event",
        durationMs: 0,
      };
      failed(result);
      await finish(ctx, claimed, leaseId, result, false);
      return;
    }
  }
  const event = eventSeenBy(owner, { event: stored, audience: delivery.audience, projectId: delivery.projectId });
  const result = await sendEvent(delivery, event, {
    network: webhookNetwork(ctx),
    allowPrivateTargets,
    timeoutMs,
    signal,
  });
  metrics.deliveryAttempts.inc({ outcome: result.ok ? 'succeeded' : 'failed' });
  metrics.deliveryDuration.observe(result.durationMs / 1000);
  if (result.ok && delivery.attempt === 1)
    metrics.deliveryLag.observe((Date.now() - delivery.occurredAt.getTime()) / 1000);
  if (!result.ok) failed(result);
  await finish(ctx, claimed, leaseId, result, true);
}

/**
 * How many milliseconds until the next attempt falls due by the database's clock (0 or less: one is
 * due now), or undefined when none is scheduled. One indexed look, so that a wake-up with nothing
 * to deliver (every commit wakes the worker) costs a statement, not a claim's transaction.
 */
async function msUntilDue(ctx: AppContext): Promise<number | undefined> {
  const next = await ctx.db.sql.first(
    tables
      .selectFrom('webhook_deliveries')
      .select((eb) =>
        sql<number | null>`(extract(epoch FROM ${eb.fn.min(
          eb.case().when('state', '=', 'pending').then(eb.ref('next_attempt_at')).else(eb.ref('lease_until')).end(),
        )} - now()) * 1000)::float8`.as('ms'),
      )
      .where('state', 'in', ['pending', 'delivering']),
  );
  return next?.ms ?? undefined;
}

/**
 * Delivers webhook attempts from this instance until stopped: woken by every committed event (on
 * any instance), by each attempt it finishes, and when the next retry falls due. It keeps up to
 * WEBHOOK_MAX_IN_FLIGHT attempts running, each claimed as a slot frees, shared fairly (claims.ts),
 * so a slow receiver holds only its own slot. Survives restarts: the schedule is in the table.
 */
export function startDeliveryWorker(ctx: AppContext): () => Promise<void> {
  const capacity = ctx.config.webhooks.maxInFlight;
  const running = new Set<Promise<void>>();
  const stopping = new AbortController();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let wake: () => void = () => undefined;
  // Set by a signal or a finished attempt during a round, so that the round after it starts at once.
  let woken = false;
  const rouse = () => {
    woken = true;
    wake();
  };

  const start = (claimed: Claimed, leaseId: string) => {
    const run: Promise<void> = attempt(ctx, claimed, leaseId, stopping.signal)
      .catch((error: unknown) =>
        ctx.logger.warn(
          { err: error, deliveryId: claimed.id },
          'webhook delivery attempt could not be recorded; another instance takes it over when its claim runs out',
        ),
      )
      .finally(() => {
        running.delete(run);
        rouse();
      });
    running.add(run);
  };

  const loop = async (): Promise<void> => {
    while (!stopped) {
      let sleepMs = 1_000;
      woken = false;
      try {
        const free = capacity - running.size;
        const dueInMs = await msUntilDue(ctx);
        sleepMs = dueInMs === undefined ? MAX_SLEEP_MS : Math.min(MAX_SLEEP_MS, Math.max(10, dueInMs));
        if (free > 0 && dueInMs !== undefined && dueInMs <= 0) {
          const leaseId = uuidv7();
          const claim = await claimFairly(ctx, leaseId, free);
          for (const claimed of claim.claimed) start(claimed, leaseId);
          // Some claimed: look again (more may be due, or the next falls due later). None: held back
          // by the per-host and per-user limits, or taken by another instance: look again shortly.
          if (claim.claimed.length > 0 && !stopped) continue;
          sleepMs = BLOCKED_POLL_MS;
        }
      } catch (error) {
        ctx.logger.warn({ err: error }, 'webhook delivery round failed; trying again shortly');
      }
      if (stopped) return;
      if (woken) continue;
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, sleepMs);
      });
    }
  };

  const unsubscribe = eventSignal(ctx).subscribe(rouse);
  const looping = loop();
  return async () => {
    stopped = true;
    unsubscribe();
    clearTimeout(timer);
    wake();
    stopping.abort(); // attempts under way end now, as failures that are retried later
    await looping;
    await Promise.all(running);
  };
}
