import { PassThrough } from 'node:stream';
import type { AppContext } from '../../server/context.js';
import { useWebhookNetwork } from '../../server/webhooks/network.js';
import { startDeliveryWorker } from '../../server/webhooks/worker.js';
import { connectionOf, type Connection } from './webhook-network.js';

/** What a name resolves to here: global unicast, so a delivery to any name goes as far as connecting (and is recorded). */
const PUBLIC_ANSWER = '93.184.215.14';

export interface OfflineDeliveries {
  /** Every name the service asked to resolve, in order. */
  lookups: string[];
  /** Every connection a delivery opened (none of them leaves the process), in order. */
  connections: Connection[];
  /** Stops the delivery worker. */
  stop(): Promise<void>;
}

/**
 * A delivery worker for a test service on a network that ends in this process: every name resolves
 * to a public address, every connection is recorded with the address it would go to and then
 * refused at once. So every attempt runs and fails, nothing leaves this machine, and a test can
 * tell whether the service would have sent anything beyond loopback.
 */
export function deliverOffline(ctx: AppContext): OfflineDeliveries {
  const lookups: string[] = [];
  const connections: Connection[] = [];
  useWebhookNetwork(ctx, {
    resolve: (hostname) => {
      lookups.push(hostname);
      return Promise.resolve([{ address: PUBLIC_ANSWER, family: 4 }]);
    },
    connect: (target) => {
      connections.push(connectionOf(target));
      const socket = new PassThrough();
      setImmediate(() => socket.destroy(new Error('connection refused (test connector)')));
      return socket;
    },
    ownAddresses: () => new Set(),
  });
  return { lookups, connections, stop: startDeliveryWorker(ctx) };
}
