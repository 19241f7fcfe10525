import { lookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import dns from 'node:dns';

// Addresses a webhook may not reach (SSRF): loopback, private, shared, link-local, unspecified,
// multicast and reserved ranges. BlockList also matches IPv4-mapped IPv6 (::ffff:127.0.0.1).
const refused = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) refused.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96]] as const) {
  refused.addSubnet(net, prefix, 'ipv6');
}

export const isRefusedAddress = (address: string): boolean => {
  const family = isIP(address);
  return family === 0 || refused.check(address, family === 4 ? 'ipv4' : 'ipv6');
};

/** The host of a URL as an address when it is one: the URL parser already reads 0x7f.1 and 2130706433 as 127.0.0.1. */
export const hostOf = (url: URL): string => url.hostname.replace(/^\[(.*)\]$/, '$1');

/**
 * Why a target may not be used, or undefined when it may. A name is resolved and every address it
 * has is checked; a name that does not resolve now is accepted (delivery checks again).
 */
export async function refusedTarget(url: URL): Promise<string | undefined> {
  const host = hostOf(url);
  if (isIP(host)) return isRefusedAddress(host) ? `${host} is a loopback, private, link-local or unspecified address` : undefined;
  const addresses = await lookup(host, { all: true, verbatim: true }).catch(() => []);
  const bad = addresses.find((entry) => isRefusedAddress(entry.address));
  return bad ? `${host} resolves to ${bad.address}, a loopback, private, link-local or unspecified address` : undefined;
}

export class RefusedTargetError extends Error {}

/**
 * A DNS lookup for the delivery's own connection that refuses private answers, so the address
 * checked is the address connected to (no DNS rebinding between a check and the connection).
 */
export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, '', 0);
    const list = Array.isArray(addresses) ? addresses : [];
    const bad = list.find((entry) => isRefusedAddress(entry.address));
    if (bad || list.length === 0) {
      return callback(new RefusedTargetError(`${hostname} resolves to ${bad?.address ?? 'nothing'}, which webhooks may not reach`), '', 0);
    }
    if (options.all) return callback(null, list);
    const first = list[0];
    callback(null, first?.address ?? '', first?.family ?? 4);
  });
};
