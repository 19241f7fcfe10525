// The live stream (`GET /events`) as an async iterator of typed events that reconnects by itself,
// resuming after the last event it yielded. Server-Sent Events are parsed here rather than with a
// library so that the client package keeps its two dependencies; the parser follows the WHATWG
// rules (fields, comments, CR/LF/CRLF line ends, a leading BOM).
import { errorOf, ProblemError, UnexpectedAnswerError } from './answers.js';
import { EVENT_TYPES } from './event-types.js';
import type { Event } from './events.js';
import { backoffMs, retryAfterMs, sleep, type RetryPolicy } from './retry.js';

/** One event of a stream as sent: `id:`, `event:` and the joined `data:` lines. */
export interface ServerSentEvent {
  id: string | undefined;
  event: string;
  data: string;
}

/** The events of a `text/event-stream` body, as they arrive; `onBytes` hears of every chunk (comments too). */
export async function* serverSentEvents(
  body: ReadableStream<Uint8Array>,
  onBytes?: () => void,
): AsyncGenerator<ServerSentEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder(); // strips a leading BOM
  let buffer = '';
  // A CR ends its line at once; an LF right after it, even in the next chunk, belongs to it.
  let afterCr = false;
  let fields: { id: string | undefined; event: string; data: string[] } = { id: undefined, event: '', data: [] };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      onBytes?.();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      if (afterCr && buffer !== '') {
        if (buffer.startsWith('\n')) buffer = buffer.slice(1);
        afterCr = false;
      }
      let end: RegExpExecArray | null;
      while ((end = /\r\n|\r|\n/.exec(buffer)) !== null) {
        const line = buffer.slice(0, end.index);
        buffer = buffer.slice(end.index + end[0].length);
        afterCr = end[0] === '\r' && buffer === '';
        if (line === '') {
          if (fields.data.length > 0)
            yield { id: fields.id, event: fields.event || 'message', data: fields.data.join('\n') };
          fields = { id: fields.id, event: '', data: [] };
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const name = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (name === 'data') fields.data.push(value);
        else if (name === 'event') fields.event = value;
        else if (name === 'id' && !value.includes('\0')) fields.id = value;
      }
      if (done) return;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

export interface SubscribeOptions {
  /** Resume after this event (the `id` of the last event you handled); default: events from now on. */
  lastEventId?: string;
  /** Ends the subscription: the loop over it finishes. */
  signal?: AbortSignal;
  /**
   * A connection that sends nothing for this long is given up and opened again (the service sends a
   * heartbeat every 15 s, so this notices a dead network path). Default 45 s.
   */
  idleTimeoutMs?: number;
  /** Called each time the stream (re)opens. */
  onOpen?: () => void;
}

/** What the stream needs from the client it belongs to. */
export interface StreamSession {
  url: string;
  fetch: typeof fetch;
  accessToken(): Promise<string | undefined>;
  /** A new access token to replace `stale`, or undefined when the session is over. */
  renewedAccessToken(stale: string): Promise<string | undefined>;
}

/** Reconnecting: from about a second, doubling to half a minute (full jitter), as EventSource does. */
const RECONNECT: RetryPolicy = { retries: Number.POSITIVE_INFINITY, baseDelayMs: 1_000, maxDelayMs: 30_000 };
/** The longest a Retry-After is obeyed before trying again anyway. */
const RETRY_AFTER_CAP_MS = 5 * 60_000;

/** An error answer as the error it throws. */
async function answerError(response: Response): Promise<ProblemError | UnexpectedAnswerError> {
  const body: unknown = await response.json().catch(() => undefined);
  return errorOf({ status: response.status, body, headers: response.headers });
}

const isKnownType = (type: string) => EVENT_TYPES.some((known) => known === type);

/** An event of a type this client knows, by its envelope (the client carries no schemas; see `validate`). */
function isEvent(data: unknown): data is Event {
  if (typeof data !== 'object' || data === null) return false;
  const fields: Partial<Record<keyof Event, unknown>> = data;
  return (
    typeof fields.id === 'string' &&
    typeof fields.type === 'string' &&
    isKnownType(fields.type) &&
    typeof fields.data === 'object' &&
    fields.data !== null
  );
}

/** The event of a `data:` field; undefined for a type this client does not know (a newer service). */
function eventOf(sent: ServerSentEvent): Event | undefined {
  let data: unknown;
  try {
    data = JSON.parse(sent.data);
  } catch {
    throw new UnexpectedAnswerError(200, sent.data);
  }
  if (isEvent(data)) return data;
  if (isKnownType(sent.event)) throw new UnexpectedAnswerError(200, data);
  return undefined;
}

/**
 * Every event the caller may see, as it commits, for as long as the loop runs. The connection is
 * opened again after a network failure, a 429 or 5xx, silence or the stream's end (with backoff,
 * resuming after the last event yielded, so nothing is missed or repeated); the access token is
 * renewed when it expires. Throws `ProblemError` when the session is over (401) or the position to
 * resume from is no longer retained (410 `cursor_expired`: read everything again, then subscribe),
 * and `UnexpectedAnswerError` for an answer or event the contract does not declare.
 */
export async function* subscribeToEvents(
  session: StreamSession,
  options: SubscribeOptions = {},
): AsyncGenerator<Event> {
  const idleTimeoutMs = options.idleTimeoutMs ?? 45_000;
  let lastEventId = options.lastEventId;
  let failures = 0;
  let renewed = false;
  while (!options.signal?.aborted) {
    const connection = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, connection.signal]) : connection.signal;
    let idle: ReturnType<typeof setTimeout> | undefined;
    const watch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => connection.abort(new Error('The event stream went quiet')), idleTimeoutMs);
    };
    let wait: number | undefined;
    try {
      watch();
      const token = await session.accessToken();
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (token) headers['authorization'] = `Bearer ${token}`;
      if (lastEventId) headers['last-event-id'] = lastEventId;
      const response = await session.fetch(session.url, { headers, signal });
      if (response.status === 401 && token && !renewed) {
        // An expired token is renewed once; a renewed token refused too means the session is over.
        const refused = await answerError(response);
        if (!(refused instanceof ProblemError && refused.problem.code === 'unauthenticated')) throw refused;
        if (!(await session.renewedAccessToken(token))) throw refused;
        renewed = true;
        continue;
      }
      if (response.status === 429 || response.status >= 500) {
        await response.body?.cancel();
        wait = retryAfterMs(response.headers.get('retry-after'));
        failures++;
      } else if (response.status !== 200 || !response.body) {
        throw await answerError(response);
      } else if (!/^text\/event-stream\b/.test(response.headers.get('content-type') ?? '')) {
        // Not the service (a captive portal, a misrouted proxy): trying again will not help.
        await response.body.cancel();
        throw new UnexpectedAnswerError(200, response.headers.get('content-type'));
      } else {
        options.onOpen?.();
        renewed = false;
        for await (const sent of serverSentEvents(response.body, watch)) {
          clearTimeout(idle); // a slow consumer is not a silent stream: no watch while it holds the event
          const event = eventOf(sent);
          lastEventId = sent.id ?? lastEventId;
          failures = 0; // only a stream that delivers counts as healthy again
          if (event) yield event;
          watch();
        }
        failures++; // the service ended the stream
      }
    } catch (error) {
      if (options.signal?.aborted) return;
      if (error instanceof ProblemError || error instanceof UnexpectedAnswerError) throw error;
      failures++; // the network, or silence: try again
    } finally {
      clearTimeout(idle);
      connection.abort();
    }
    // The backoff at least, a Retry-After when longer, never more than RETRY_AFTER_CAP_MS.
    const delay = Math.min(Math.max(wait ?? 0, backoffMs(RECONNECT, Math.min(failures, 10))), RETRY_AFTER_CAP_MS);
    await sleep(delay, options.signal).catch(() => undefined);
  }
}
