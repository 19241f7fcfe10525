import { lookup } from 'node:dns/promises';
import net, { type LookupFunction } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import type { AppContext } from '../context.js';
import { normalizedAddresses, type NameResolver } from './targets.js';

/**
 * How deliveries reach the network: the resolver that names are checked with, the connector that
 * opens a socket (its options carry a `lookup` that answers only the checked addresses), and the
 * addresses the service itself listens on. Tests replace it, so that no test resolves or connects
 * beyond loopback.
 */
export interface WebhookNetwork extends NameResolver {
  connect(target: ConnectTarget): Duplex;
}

export interface ConnectTarget {
  /** The URL's host: a name (for `lookup`, and TLS's certificate check) or an address. */
  hostname: string;
  port: number;
  secure: boolean;
  /** Answers only addresses already checked, so the socket goes where the check looked. */
  lookup: LookupFunction;
}

const WILDCARDS = new Set(['0.0.0.0', '::', '']);

/** The machine's interfaces when the service listens on all of them, else the one address it listens on (and the interfaces anyway: the same host). */
function ownAddressesOf(host: string): ReadonlySet<string> {
  const interfaces = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((entry) => entry.address));
  return normalizedAddresses(WILDCARDS.has(host) ? interfaces : [...interfaces, host]);
}

export function systemNetwork(host: string): WebhookNetwork {
  return {
    resolve: (hostname) => lookup(hostname, { all: true, verbatim: true }),
    // net and tls call `lookup` for a name (not for an address); TLS checks the certificate against the name.
    connect: ({ hostname, port, secure, lookup: pinned }) =>
      secure
        ? tls.connect({ host: hostname, port, lookup: pinned, ...(net.isIP(hostname) ? {} : { servername: hostname }) })
        : net.createConnection({ host: hostname, port, lookup: pinned }),
    ownAddresses: () => ownAddressesOf(host),
  };
}

const chosen = new WeakMap<AppContext, WebhookNetwork>();

/** The network this service's deliveries use: the system's unless a test chose another. */
export function webhookNetwork(ctx: AppContext): WebhookNetwork {
  let network = chosen.get(ctx);
  if (!network) {
    network = systemNetwork(ctx.config.host);
    chosen.set(ctx, network);
  }
  return network;
}

/** Replaces the resolver and connector of one service (tests: nothing leaves loopback). */
export function useWebhookNetwork(ctx: AppContext, network: WebhookNetwork): void {
  chosen.set(ctx, network);
}
