import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** IANA's global unicast allocation: ipaddr.js calls anything outside its named ranges `unicast`, `::7f00:1` included. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');
/** NAT64's well-known prefix carries an IPv4 in its last 32 bits; the local-use 64:ff9b:1::/48 is refused outright. */
const NAT64 = ipaddr.parseCIDR('64:ff9b::/96');

const ipv4Of = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);

/** The IPv4 addresses an IPv6 address stands for, when it is one of the ways of writing or tunnelling one. */
function carriedIPv4(address: ipaddr.IPv6): ipaddr.IPv4[] | undefined {
  const [, p1 = 0, p2 = 0, p3 = 0, , , p6 = 0, p7 = 0] = address.parts;
  switch (address.range()) {
    case 'ipv4Mapped':
      return [address.toIPv4Address()];
    case 'rfc6052':
      return address.match(NAT64) ? [ipv4Of(p6, p7)] : undefined;
    case '6to4':
      return [ipv4Of(p1, p2)];
    case 'teredo':
      // The Teredo server, and the client's address (stored inverted).
      return [ipv4Of(p2, p3), ipv4Of(~p6 & 0xffff, ~p7 & 0xffff)];
    default:
      return undefined;
  }
}

/**
 * Global unicast by the IANA special-purpose registries (as ipaddr.js names their ranges: every
 * name but `unicast` is refused), judging an IPv4 by its own range however it is written inside
 * an IPv6 address (mapped, NAT64, 6to4, Teredo), and IPv6 only inside 2000::/3.
 */
function isGlobalUnicast(address: Address): boolean {
  if (address instanceof ipaddr.IPv4) return address.range() === 'unicast';
  const carried = carriedIPv4(address);
  if (carried) return carried.every((ipv4) => ipv4.range() === 'unicast');
  return address.range() === 'unicast' && address.match(GLOBAL_UNICAST_V6);
}

const normalized = (address: Address) =>
  (address instanceof ipaddr.IPv6 && address.isIPv4MappedAddress()
    ? address.toIPv4Address()
    : address
  ).toNormalizedString();

/**
 * An address in any spelling, or undefined. An IPv6 address with a dotted tail goes through the URL
 * parser first: ipaddr.js reads `::8.8.8.8` (IPv4-compatible) as `::ffff:8.8.8.8` (IPv4-mapped).
 */
function parseAddress(spelled: string): Address | undefined {
  const address = spelled.replace(/%.*$/, ''); // a zone id (fe80::1%eth0) changes nothing here
  const canonical =
    address.includes(':') && address.includes('.') && URL.canParse(`http://[${address}]/`)
      ? new URL(`http://[${address}]/`).hostname.slice(1, -1)
      : address;
  return ipaddr.isValid(canonical) ? ipaddr.parse(canonical) : undefined;
}

/** Whether a webhook may connect to `address` (any spelling), given the service's own addresses. */
export function isAllowedAddress(address: string, own: ReadonlySet<string>): boolean {
  const parsed = parseAddress(address);
  return parsed !== undefined && isGlobalUnicast(parsed) && !own.has(normalized(parsed));
}

/** Addresses in the form `isAllowedAddress` compares the service's own with. */
export function normalizedAddresses(addresses: Iterable<string>): Set<string> {
  return new Set(
    [...addresses].flatMap((address) => {
      const parsed = parseAddress(address);
      return parsed ? [normalized(parsed)] : [];
    }),
  );
}

/** The host of a URL without IPv6 brackets: the URL parser already reads 0x7f.1 and 2130706433 as 127.0.0.1. */
export const hostOf = (url: URL): string => url.hostname.replace(/^\[(.*)\]$/, '$1');

export interface ResolvedTarget {
  /** Every address the host has now, in the resolver's order. */
  addresses: { address: string; family: number }[];
  /** Whether every one of them is a global unicast address that is not the service's own. */
  allowed: boolean;
}

/** RFC 6761 §6.4: a name under `.invalid` never resolves, so it is answered at once without asking DNS. */
const NEVER_RESOLVES = /(^|\.)invalid\.?$/;

/** What judging a target needs of the network (network.ts's WebhookNetwork, or a test's stub). */
export interface NameResolver {
  resolve(hostname: string): Promise<{ address: string; family: number }[]>;
  /** The service's own addresses, as normalizedAddresses gives them. */
  ownAddresses(): ReadonlySet<string>;
}

/**
 * Resolves a target's host (an address literal stands for itself) and judges every address it has.
 * A name under `.invalid` rejects as not found with no query: its deliveries fail without any
 * traffic (task-service-verify's webhook relies on it).
 */
export async function resolveTarget(url: URL, network: NameResolver): Promise<ResolvedTarget> {
  const host = hostOf(url);
  const family = isIP(host);
  if (!family && NEVER_RESOLVES.test(host))
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  const addresses = family ? [{ address: host, family }] : await network.resolve(host);
  const own = network.ownAddresses();
  return {
    addresses,
    allowed: addresses.length > 0 && addresses.every((entry) => isAllowedAddress(entry.address, own)),
  };
}
