// Checking a webhook delivery on the receiving side: its Standard Webhooks signature
// (https://www.standardwebhooks.com), its age, and its body against the contract. WebCrypto only,
// so it runs in Node 20+, Deno, Bun, edge runtimes and browsers without another dependency.
import { EventSchema, type Event } from './events.js';

/** A delivery that must be refused (answer it 400 or 401): forged, altered, replayed late, or malformed. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
}

export interface WebhookDelivery {
  /** The request's headers: a fetch `Headers` (of any realm, e.g. undici's), or a plain object such as Node's `req.headers`. */
  headers: { get(name: string): string | null } | Record<string, string | string[] | undefined>;
  /** The body exactly as received (bytes or text), not JSON parsed and serialised again. */
  body: string | Uint8Array;
}

export interface VerifyWebhookOptions {
  /** How far `webhook-timestamp` may be from now, either way. Default 300 s (the specification's). */
  toleranceSeconds?: number;
  /** The time to check against; default: now. */
  now?: Date;
}

/** A header by its lower-case name: from any fetch-style `Headers` (any realm), or a plain object in any letter case. */
function header(headers: WebhookDelivery['headers'], name: string): string {
  const get = headers.get;
  const value =
    typeof get === 'function'
      ? get.call(headers, name)
      : Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1];
  const first = Array.isArray(value) ? value[0] : value;
  if (!first) throw new WebhookVerificationError(`The ${name} header is missing`);
  return first;
}

function base64Bytes(text: string): Uint8Array<ArrayBuffer> | undefined {
  try {
    return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
  } catch {
    return undefined;
  }
}

/**
 * The event of a webhook delivery, once its signature checks with the webhook's `secret` (the
 * `whsec_…` shown when the webhook was created), its timestamp is within the tolerance and its body
 * is an Event of the contract; else throws `WebhookVerificationError`. The same event may arrive
 * more than once (deliveries are at least once): deduplicate on `event.id`.
 */
export async function verifyWebhook(
  secret: string,
  delivery: WebhookDelivery,
  options: VerifyWebhookOptions = {},
): Promise<Event> {
  const id = header(delivery.headers, 'webhook-id');
  const timestamp = header(delivery.headers, 'webhook-timestamp');
  const signatures = header(delivery.headers, 'webhook-signature');
  const now = (options.now ?? new Date()).getTime() / 1000;
  if (!/^\d{1,12}$/.test(timestamp))
    throw new WebhookVerificationError('The webhook-timestamp header is not a Unix time');
  // Written so that a NaN (a bad `now` or tolerance) refuses rather than skips the check.
  if (!(Math.abs(now - Number(timestamp)) <= (options.toleranceSeconds ?? 300)))
    throw new WebhookVerificationError('The delivery is too old, or from the future');

  const keyBytes = base64Bytes(secret.replace(/^whsec_/, ''));
  if (!keyBytes || keyBytes.length === 0) throw new WebhookVerificationError('The secret is not a whsec_ secret');
  const key = await globalThis.crypto.subtle.importKey('raw', keyBytes, { name: 'HMAC', hash: 'SHA-256' }, false, [
    'verify',
  ]);
  const body = typeof delivery.body === 'string' ? new TextEncoder().encode(delivery.body) : delivery.body;
  const prefix = new TextEncoder().encode(`${id}.${timestamp}.`);
  const signed = new Uint8Array(prefix.length + body.length);
  signed.set(prefix);
  signed.set(body, prefix.length);

  // Several space-separated signatures may be sent (while a secret is rotated): one valid is enough.
  let valid = false;
  for (const candidate of signatures.split(' ')) {
    const [version, encoded] = candidate.split(',');
    const signature = version === 'v1' && encoded ? base64Bytes(encoded) : undefined;
    // crypto.subtle.verify compares in constant time.
    if (signature && (await globalThis.crypto.subtle.verify('HMAC', key, signature, signed))) valid = true;
  }
  if (!valid) throw new WebhookVerificationError('No signature matches: the secret is wrong, or the body was altered');

  let data: unknown;
  try {
    data = JSON.parse(new TextDecoder().decode(body));
  } catch {
    throw new WebhookVerificationError('The body is not JSON');
  }
  const event = EventSchema.safeParse(data);
  if (!event.success)
    throw new WebhookVerificationError(`The body is not an event of the contract: ${event.error.message}`);
  if (event.data.id !== id) throw new WebhookVerificationError('The webhook-id header is not the event id');
  return event.data;
}
