import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { Webhook as Signer } from 'standardwebhooks';
import type { Event } from '@task-service/client';
import { guardedLookup, hostOf, isRefusedAddress } from './targets.js';

/** A 2xx within this time is success (API.md). */
const TIMEOUT_MS = 10_000;

export interface AttemptResult {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/**
 * POSTs the event to the webhook's URL, signed per Standard Webhooks (`webhook-id` is the event id,
 * the same on every retry). Never throws: every failure is a result for the log. Unless private
 * targets are allowed, the address connected to is checked (so DNS rebinding cannot slip past).
 */
export function sendEvent(target: { url: string; secret: string }, event: Event, allowPrivateTargets: boolean): Promise<AttemptResult> {
  const started = performance.now();
  const result = (statusCode: number | null, error: string | null): AttemptResult => ({
    ok: statusCode !== null && statusCode >= 200 && statusCode < 300,
    statusCode,
    error: error ?? (statusCode !== null && (statusCode < 200 || statusCode >= 300) ? `the receiver answered ${statusCode}` : null),
    durationMs: Math.round(performance.now() - started),
  });
  const url = new URL(target.url);
  if (!allowPrivateTargets && isIP(hostOf(url)) && isRefusedAddress(hostOf(url))) {
    return Promise.resolve(result(null, `${hostOf(url)} is an address webhooks may not reach`));
  }
  const body = JSON.stringify(event);
  const now = new Date();
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'task-service-webhooks',
    'webhook-id': event.id,
    'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
    'webhook-signature': new Signer(target.secret).sign(event.id, now, body),
  };
  return new Promise((resolve) => {
    const client = url.protocol === 'https:' ? https : http;
    const req = client.request(url, { method: 'POST', headers, ...(allowPrivateTargets ? {} : { lookup: guardedLookup }) }, (res) => {
      res.resume(); // the answer's body is not needed
      clearTimeout(timer);
      resolve(result(res.statusCode ?? null, null));
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${TIMEOUT_MS / 1000} s`)), TIMEOUT_MS);
    req.on('error', (error) => {
      clearTimeout(timer);
      resolve(result(null, error.message));
    });
    req.end(body);
  });
}
