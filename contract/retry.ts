// When and how long to wait before sending a call again.

export interface RetryOptions {
  /** Attempts after the first; 0 turns retrying off. Default 2. */
  retries?: number;
  /** The first backoff, doubled on each retry, with full jitter. Default 200 ms. */
  baseDelayMs?: number;
  /** The longest wait: an answer whose Retry-After asks for longer is returned as it is. Default 10,000 ms. */
  maxDelayMs?: number;
}
export type RetryPolicy = Required<RetryOptions>;

export const retryPolicy = (options: RetryOptions | false | undefined): RetryPolicy =>
  options === false
    ? { retries: 0, baseDelayMs: 0, maxDelayMs: 0 }
    : { retries: 2, baseDelayMs: 200, maxDelayMs: 10_000, ...options };

const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/**
 * A call that may be sent twice without harm: an idempotent method, or any method with an
 * `Idempotency-Key` header (the service then answers a repeat with the first answer).
 */
export const isIdempotent = (method: string, headers: Record<string, string>): boolean =>
  IDEMPOTENT_METHODS.has(method.toUpperCase()) ||
  Object.keys(headers).some((name) => name.toLowerCase() === 'idempotency-key');

/** Seconds or an HTTP date (RFC 9110 §10.2.3), in milliseconds from now; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Full-jitter exponential backoff (AWS's "exponential backoff and jitter"). */
export const backoffMs = (policy: RetryPolicy, retry: number): number =>
  Math.random() * Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retry);

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The statuses that say "not now, try again later". */
export const RETRYABLE_STATUSES = new Set([429, 503]);
