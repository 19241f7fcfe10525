import { sweepOrphans } from './attachments/sweep.js';
import { purgeEndedSessions } from './auth/sessions.js';
import type { AppContext } from './context.js';
import { underLease } from './db/leases.js';
import { purgeExpiredEvents } from './events/log.js';
import { startDeliveryWorker } from './webhooks/worker.js';
import { purgeExpiredIdempotencyKeys } from './http/idempotency.js';
import { purgeExpiredTokens } from './tokens/service.js';
import { purgeEndedGrants } from './oauth/access.js';
import { purgeUnusedClients } from './oauth/clients.js';

const EVERY_MS = 5 * 60_000;
/** Far longer than a round takes; only a crashed holder makes the others wait this long. */
const LEASE_MS = 15 * 60_000;

/** One round of housekeeping; each job's failure is logged and retried next round. */
export async function runMaintenance(ctx: AppContext): Promise<void> {
  const jobs: [string, () => Promise<unknown>][] = [
    [
      'attachment orphan sweep',
      async () => {
        const result = await sweepOrphans(ctx);
        if (result.staleWrites + result.orphans > 0) ctx.logger.info(result, 'removed abandoned attachment bytes');
      },
    ],
    [
      'session purge',
      async () => {
        const purged = await purgeEndedSessions(ctx);
        if (purged > 0) ctx.logger.info({ purged }, 'purged ended sessions');
      },
    ],
    [
      'event retention purge',
      async () => {
        const purged = await purgeExpiredEvents(ctx);
        if (purged > 0) ctx.logger.info({ purged }, 'purged events past the retention');
      },
    ],
    ['idempotency key purge', () => purgeExpiredIdempotencyKeys(ctx)],
    ['personal access token purge', () => purgeExpiredTokens(ctx)],
    ['OAuth grant purge', () => purgeEndedGrants(ctx)],
    ['unused OAuth client purge', () => purgeUnusedClients(ctx)],
  ];
  for (const [name, job] of jobs) {
    // Every instance runs housekeeping; the lease lets one at a time do each job.
    const outcome = await underLease(ctx.db.sql, name, LEASE_MS, job).catch((error: unknown) => {
      ctx.logger.warn({ err: error }, `${name} failed; it will run again`);
    });
    if (outcome && !outcome.ran) ctx.logger.debug(`${name}: another instance is running it`);
  }
}

/**
 * Runs housekeeping now and every few minutes, and the event workers (webhook deliveries). Safe on
 * every instance: a housekeeping job runs on one instance at a time, and each is idempotent; the
 * delivery workers of all instances share the queue. The returned function stops both and waits
 * for work under way.
 */
export function startMaintenance(ctx: AppContext, everyMs = EVERY_MS): () => Promise<void> {
  let running: Promise<void> = runMaintenance(ctx);
  const timer = setInterval(() => {
    running = running.then(() => runMaintenance(ctx));
  }, everyMs);
  timer.unref();
  // The webhook deliveries run beside the housekeeping (the event retention purge is part of it).
  const stopDeliveries = startDeliveryWorker(ctx);
  return async () => {
    clearInterval(timer);
    await Promise.all([running, stopDeliveries()]);
  };
}
