import type { AppContext } from '../context.js';
import { startDeliveryWorker } from '../webhooks/worker.js';

/**
 * The event system's background work on this instance: webhook deliveries (the retention purge
 * runs with the other housekeeping). Returns a function that stops it and waits for work under way.
 */
export function startEventWorkers(ctx: AppContext): () => Promise<void> {
  return startDeliveryWorker(ctx);
}
