import { v7 as uuidv7 } from 'uuid';
import type { AppContext } from '../context.js';
import { eventFromRow, eventSeenBy } from '../events/log.js';
import { eventMetrics } from '../events/metrics.js';
import { eventSignal } from '../events/signal.js';
import { sendEvent, type AttemptResult } from './send.js';

/** Attempts one instance makes at once. */
const BATCH = 8;
/** A claimed attempt not finished by then (the instance died) may be taken by another instance. */
const LEASE_SECONDS = 60;
const SWITCH_OFF_AFTER_MS = 3 * 24 * 3600 * 1000;
const MAX_SLEEP_MS = 5_000;

/** ±20% around the scheduled delay, so that receivers coming back are not hit by everyone at once. */
const jittered = (seconds: number) => seconds * 1000 * (0.8 + Math.random() * 0.4);

/**
 * Takes due attempts for this instance: pending ones whose time has come, and ones whose claim ran
 * out. SKIP LOCKED lets every instance claim at once without two taking the same attempt; the
 * claim commits before the HTTP call, so no transaction stays open while a receiver answers.
 */
async function claimDue(ctx: AppContext, leaseId: string): Promise<string[]> {
  const rows = await ctx.db.prisma.$queryRaw<{ id: string }[]>`
    WITH due AS (
      SELECT id FROM webhook_deliveries
      WHERE (state = 'pending' AND next_attempt_at <= now()) OR (state = 'delivering' AND lease_until < now())
      ORDER BY next_attempt_at
      LIMIT ${BATCH}
      FOR UPDATE SKIP LOCKED
    )
    UPDATE webhook_deliveries d
    SET state = 'delivering', lease_id = ${leaseId}::uuid, lease_until = now() + make_interval(secs => ${LEASE_SECONDS})
    FROM due WHERE d.id = due.id
    RETURNING d.id::text AS id`;
  return rows.map((row) => row.id);
}

/** Records an attempt's outcome; a failure schedules the next attempt or switches the webhook off. */
async function finish(ctx: AppContext, deliveryId: string, leaseId: string, result: AttemptResult, retry: boolean): Promise<void> {
  const schedule = ctx.config.webhooks.retryScheduleSeconds;
  await ctx.db.prisma.$transaction(async (tx) => {
    const delivery = await tx.webhookDelivery.findUnique({ where: { id: deliveryId } });
    if (!delivery || delivery.leaseId !== leaseId || delivery.state !== 'delivering') return; // another instance took it over
    await tx.webhookDelivery.update({
      where: { id: deliveryId },
      data: { state: result.ok ? 'succeeded' : 'failed', statusCode: result.statusCode, error: result.error, durationMs: result.durationMs, nextAttemptAt: null, leaseId: null, leaseUntil: null },
    });
    if (!retry) return;
    const [webhook] = await tx.$queryRaw<{ failing_since: Date | null; active: boolean }[]>`
      SELECT failing_since, active FROM webhooks WHERE id = ${delivery.webhookId}::uuid FOR UPDATE`;
    if (!webhook) return;
    const now = new Date();
    if (result.ok) {
      if (webhook.failing_since) await tx.webhook.update({ where: { id: delivery.webhookId }, data: { failingSince: null } });
      return;
    }
    const failingSince = webhook.failing_since ?? now;
    if (now.getTime() - failingSince.getTime() >= SWITCH_OFF_AFTER_MS) {
      await tx.webhook.update({
        where: { id: delivery.webhookId },
        data: { active: false, disabledReason: `every delivery failed for 3 days (since ${failingSince.toISOString()}); the last: ${result.error ?? 'failed'}`, updatedAt: now },
      });
      return;
    }
    if (!webhook.failing_since) await tx.webhook.update({ where: { id: delivery.webhookId }, data: { failingSince } });
    const delay = schedule[delivery.attempt - 1];
    if (delay === undefined || !webhook.active) return; // the schedule is spent: the log keeps the failure
    await tx.webhookDelivery.create({
      data: {
        id: uuidv7(),
        webhookId: delivery.webhookId,
        eventId: delivery.eventId,
        eventType: delivery.eventType,
        attempt: delivery.attempt + 1,
        nextAttemptAt: new Date(now.getTime() + jittered(delay)),
      },
    });
  });
}

async function attempt(ctx: AppContext, deliveryId: string, leaseId: string): Promise<void> {
  const delivery = await ctx.db.prisma.webhookDelivery.findUnique({ where: { id: deliveryId }, include: { webhook: { include: { owner: { select: { role: true } } } }, event: true } });
  if (!delivery) return;
  const metrics = eventMetrics(ctx);
  if (!delivery.webhook.active) {
    await finish(ctx, deliveryId, leaseId, { ok: false, statusCode: null, error: 'the webhook is switched off', durationMs: 0 }, false);
    return;
  }
  // The owner's role now, as the live stream decides it per event.
  const owner = { userId: delivery.webhook.ownerId, admin: delivery.webhook.owner.role === 'admin' };
  const event = eventSeenBy(owner, { event: eventFromRow(delivery.event), audience: delivery.event.audience });
  const result = await sendEvent(delivery.webhook, event, ctx.config.webhooks.allowPrivateTargets);
  metrics.deliveryAttempts.inc({ outcome: result.ok ? 'succeeded' : 'failed' });
  metrics.deliveryDuration.observe(result.durationMs / 1000);
  if (result.ok && delivery.attempt === 1) metrics.deliveryLag.observe((Date.now() - delivery.event.occurredAt.getTime()) / 1000);
  await finish(ctx, deliveryId, leaseId, result, true);
}

/** How long to wait before the next attempt falls due (a signal wakes the worker sooner). */
async function untilNextDue(ctx: AppContext): Promise<number> {
  const [next] = await ctx.db.prisma.$queryRaw<{ at: Date | null }[]>`
    SELECT min(CASE WHEN state = 'pending' THEN next_attempt_at ELSE lease_until END) AS at
    FROM webhook_deliveries WHERE state IN ('pending', 'delivering')`;
  if (!next?.at) return MAX_SLEEP_MS;
  return Math.min(MAX_SLEEP_MS, Math.max(10, next.at.getTime() - Date.now()));
}

/**
 * Delivers webhook attempts from this instance until stopped: woken by every committed event (on
 * any instance) and when the next retry falls due. Survives restarts: the schedule is in the table.
 */
export function startDeliveryWorker(ctx: AppContext): () => Promise<void> {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let wake: () => void = () => undefined;
  // Set by a signal during a round, so that the round after it starts at once.
  let woken = false;

  const round = async (): Promise<void> => {
    const leaseId = uuidv7();
    const claimed = await claimDue(ctx, leaseId);
    await Promise.all(claimed.map((id) => attempt(ctx, id, leaseId)));
    if (claimed.length === BATCH) return round();
  };

  const loop = async (): Promise<void> => {
    while (!stopped) {
      let sleepMs = 1_000;
      woken = false;
      try {
        await round();
        sleepMs = await untilNextDue(ctx);
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

  const unsubscribe = eventSignal(ctx).subscribe(() => {
    woken = true;
    wake();
  });
  const running = loop();
  return async () => {
    stopped = true;
    unsubscribe();
    clearTimeout(timer);
    wake();
    await running;
  };
}
