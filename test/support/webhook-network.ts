import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { ConnectTarget, WebhookNetwork } from '../../server/webhooks/network.js';

export interface Connection {
  /** The URL's host as the delivery gave it. */
  hostname: string;
  /** The address the socket would have gone to: what the delivery's pinned lookup answered. */
  address: string;
  port: number;
}

/**
 * A resolver and connector for deliveries that never leave loopback: names resolve to what the test
 * says (else ENOTFOUND), and every connection, to whatever checked address, goes to `loopbackPort`
 * on 127.0.0.1 instead, after being recorded. Lookups and connections are logged in order.
 */
/** Where a connection would go: for a name, what net.connect would do, ask the lookup it was given. */
export function connectionOf(target: ConnectTarget): Connection {
  let address = target.hostname;
  if (!net.isIP(target.hostname)) {
    target.lookup(target.hostname, {}, (error, answered) => {
      if (error) throw error;
      address = typeof answered === 'string' ? answered : (answered[0]?.address ?? '');
    });
  }
  return { hostname: target.hostname, address, port: target.port };
}

const LOOPBACK = new net.BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** Whether a connection would stay on this machine's loopback interface. */
export const isLoopback = (connection: Connection): boolean => {
  const family = net.isIP(connection.address);
  return family !== 0 && LOOPBACK.check(connection.address, family === 6 ? 'ipv6' : 'ipv4');
};

export interface StubNetwork extends WebhookNetwork {
  answer(hostname: string, addresses: string[]): void;
  lookups: string[];
  connections: Connection[];
}

export function stubNetwork(loopbackPort: () => number, own: string[] = []): StubNetwork {
  const answers = new Map<string, string[]>();
  const lookups: string[] = [];
  const connections: Connection[] = [];
  return {
    answer: (hostname, addresses) => answers.set(hostname, addresses),
    lookups,
    connections,
    resolve: async (hostname) => {
      lookups.push(hostname);
      const addresses = answers.get(hostname);
      if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      return addresses.map((address) => ({ address, family: net.isIP(address) }));
    },
    connect: (target: ConnectTarget): Duplex => {
      connections.push(connectionOf(target));
      return net.createConnection({ host: '127.0.0.1', port: loopbackPort() });
    },
    ownAddresses: () => new Set(own),
  };
}
