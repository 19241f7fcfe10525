import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { Webhook as Signer } from 'standardwebhooks';
import type { Event } from '@task-service/client';
import type { WebhookNetwork } from './network.js';
import { hostOf, resolveTarget } from './targets.js';

/** Of the receiver's answer only this much is read, then the connection is dropped, so a receiver cannot make us hold its answer. */
const MAX_ANSWER_BYTES = 64 * 1024;

export interface AttemptResult {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

export interface SendOptions {
  network: WebhookNetwork;
  allowPrivateTargets: boolean;
  /** The whole exchange: resolving, connecting, sending, the answer's headers and body. */
  timeoutMs: number;
  /** Aborted when the service stops: the attempt ends at once as a failure. */
  signal: AbortSignal;
}

export const REFUSED_TARGET =
  'the target resolves to an address webhooks may not reach (not global unicast, or this service itself)';

/** A `lookup` that answers only the addresses already resolved and checked: no second query that a rebinding name could answer differently. */
function pinnedLookup(addresses: { address: string; family: number }[]): LookupFunction {
  return (_hostname, options, callback) => {
    const usable = addresses.filter((entry) => !options.family || entry.family === options.family);
    if (options.all) return callback(null, usable);
    const [first] = usable;
    if (!first)
      return callback(Object.assign(new Error('no checked address of the asked family'), { code: 'ENOTFOUND' }), '', 0);
    callback(null, first.address, first.family);
  };
}

/**
 * POSTs the event to the webhook's URL, signed per Standard Webhooks (`webhook-id` is the event id,
 * the same on every retry). Never throws: every failure is a result for the log. Unless private
 * targets are allowed, every address the name has is checked before any connection is opened, and
 * the socket goes to one of those addresses. One timer covers the whole exchange, the answer's body
 * included, so a receiver that trickles bytes cannot hold the socket.
 */
export async function sendEvent(
  target: { url: string; secret: string },
  event: Event,
  options: SendOptions,
): Promise<AttemptResult> {
  const started = performance.now();
  const result = (statusCode: number | null, error: string | null): AttemptResult => ({
    ok: error === null && statusCode !== null && statusCode >= 200 && statusCode < 300,
    statusCode,
    error:
      error ??
      (statusCode !== null && (statusCode < 200 || statusCode >= 300) ? `the receiver answered ${statusCode}` : null),
    durationMs: Math.round(performance.now() - started),
  });
  const seconds = `${options.timeoutMs / 1000} s`;
  const exchange = new AbortController();
  const onStop = () => exchange.abort(new Error('the attempt was interrupted: the service stopped'));
  options.signal.addEventListener('abort', onStop, { once: true });
  const timer = setTimeout(() => exchange.abort(new Error(`no complete answer within ${seconds}`)), options.timeoutMs);
  const abortReason = () => (exchange.signal.reason instanceof Error ? exchange.signal.reason.message : 'aborted');
  try {
    if (options.signal.aborted) return result(null, 'the attempt was interrupted: the service stopped');
    const url = new URL(target.url);
    const resolving = resolveTarget(url, options.network).catch((error: unknown) =>
      error instanceof Error ? error : new Error(String(error)),
    );
    const aborted = new Promise<'aborted'>((resolve) =>
      exchange.signal.addEventListener('abort', () => resolve('aborted'), { once: true }),
    );
    const resolved = await Promise.race([resolving, aborted]);
    if (resolved === 'aborted') return result(null, abortReason());
    if (resolved instanceof Error)
      return result(
        null,
        `the target's name did not resolve (${'code' in resolved ? String(resolved.code) : 'no answer'})`,
      );
    if (!options.allowPrivateTargets && !resolved.allowed) return result(null, REFUSED_TARGET);
    if (resolved.addresses.length === 0) return result(null, "the target's name has no address");
    return await post(
      url,
      signed(target.secret, event),
      pinnedLookup(resolved.addresses),
      options.network,
      exchange.signal,
      result,
      abortReason,
    );
  } finally {
    clearTimeout(timer);
    options.signal.removeEventListener('abort', onStop);
  }
}

function signed(secret: string, event: Event): { headers: Record<string, string>; body: string } {
  const body = JSON.stringify(event);
  const now = new Date();
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'task-service-webhooks',
      'webhook-id': event.id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': new Signer(secret).sign(event.id, now, body),
    },
  };
}

/** The HTTP exchange itself, until the answer's body ended, 64 KiB of it were read, or `signal` aborted it. */
function post(
  url: URL,
  request: { headers: Record<string, string>; body: string },
  lookup: LookupFunction,
  network: WebhookNetwork,
  signal: AbortSignal,
  result: (statusCode: number | null, error: string | null) => AttemptResult,
  abortReason: () => string,
): Promise<AttemptResult> {
  return new Promise((resolve) => {
    const secure = url.protocol === 'https:';
    const port = Number(url.port || (secure ? 443 : 80));
    let settled = false;
    let status: number | null = null;
    const settle = (error: string | null) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      req.destroy(); // no keep-alive: the socket is closed whatever happened
      resolve(result(status, error));
    };
    const client = secure ? https : http;
    const req = client.request(
      url,
      {
        method: 'POST',
        headers: request.headers,
        lookup,
        // No agent: one socket per attempt, to the checked address, closed when the attempt ends.
        createConnection: () => network.connect({ hostname: hostOf(url), port, secure, lookup }),
      },
      (res) => {
        status = res.statusCode ?? null;
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read >= MAX_ANSWER_BYTES) settle(null); // enough: the rest is dropped
        });
        res.on('end', () => settle(null));
        res.on('close', () => settle(signal.aborted ? abortReason() : 'the answer was cut off'));
      },
    );
    const onAbort = () => settle(abortReason());
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    req.on('error', (error) => settle(signal.aborted ? abortReason() : error.message));
    req.end(request.body);
  });
}
