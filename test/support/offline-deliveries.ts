import { PassThrough } from 'node:stream';
import type { AppContext } from '../../server/context.js';
import { useWebhookNetwork } from '../../server/webhooks/network.js';
import { startDeliveryWorker } from '../../server/webhooks/worker.js';

/**
 * A delivery worker for a test service whose webhooks point at public addresses (verify()'s do):
 * every attempt runs and fails at once on a connector that refuses, so no attempt leaves this
 * machine. Returns the worker's stop.
 */
export function deliverOffline(ctx: AppContext): () => Promise<void> {
  useWebhookNetwork(ctx, {
    resolve: () => Promise.resolve([]),
    connect: () => {
      const socket = new PassThrough();
      setImmediate(() => socket.destroy(new Error('connection refused (test connector)')));
      return socket;
    },
    ownAddresses: () => new Set(),
  });
  return startDeliveryWorker(ctx);
}
