import { afterAll } from 'vitest';
import http from 'node:http';
import { EventSchema, type Event } from '../../contract/events.js';

export interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

/** A Server-Sent Events client over a real socket, reading frames as they come. */
export interface SseConnection {
  status: number;
  headers: http.IncomingHttpHeaders;
  frames: SseFrame[];
  /** The events received so far, parsed. */
  events(): Event[];
  /** Waits until `predicate` holds for what was received (or the stream ended, or the timeout passed). */
  until(predicate: (frames: SseFrame[]) => boolean, timeoutMs?: number): Promise<void>;
  ended: Promise<void>;
  close(): void;
  /** The body when the answer was not a stream (an error). */
  body(): string;
}

export function openSse(baseUrl: string, headers: Record<string, string>): Promise<SseConnection> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${baseUrl}/events`, { headers: { Accept: 'text/event-stream', ...headers } }, (res) => {
      const frames: SseFrame[] = [];
      const waiters = new Set<() => void>();
      let buffer = '';
      let raw = '';
      let done = false;
      const ended = new Promise<void>((resolveEnd) => {
        const end = () => {
          done = true;
          for (const wake of waiters) wake();
          resolveEnd();
        };
        res.on('end', end);
        res.on('close', end);
        res.on('error', end);
      });
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        raw += chunk;
        buffer += chunk;
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const frame: SseFrame = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) frame.comment = line.slice(1).trim();
            else {
              const colon = line.indexOf(':');
              const field = line.slice(0, colon);
              const value = line.slice(colon + 1).replace(/^ /, '');
              if (field === 'id' || field === 'event' || field === 'data') frame[field] = value;
            }
          }
          frames.push(frame);
        }
        for (const wake of waiters) wake();
      });
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        frames,
        events: () =>
          frames.filter((f) => f.data !== undefined).map((f) => EventSchema.parse(JSON.parse(f.data ?? ''))),
        until: (predicate, timeoutMs = 20_000) =>
          new Promise((resolveWait, rejectWait) => {
            const check = () => {
              if (predicate(frames)) {
                cleanup();
                resolveWait();
              } else if (done) {
                cleanup();
                rejectWait(new Error(`the stream ended first; frames: ${JSON.stringify(frames)}`));
              }
            };
            const timer = setTimeout(() => {
              cleanup();
              rejectWait(new Error(`timed out; frames: ${JSON.stringify(frames)}`));
            }, timeoutMs);
            const cleanup = () => {
              clearTimeout(timer);
              waiters.delete(check);
            };
            waiters.add(check);
            check();
          }),
        ended,
        close: () => req.destroy(),
        body: () => raw,
      });
    });
    req.on('error', reject);
  });
}

/** The number of events (frames with data) received. */
export const eventCount = (frames: SseFrame[]) => frames.filter((f) => f.data !== undefined).length;

/**
 * Streams to a file's (or describe block's) listening service: `connect(user)` opens one as that
 * user; `closeAll()` closes every one opened so far, as the last test's end does.
 */
export function streamsTo(service: { readonly baseUrl: string }): {
  connect(user: { auth: string }, headers?: Record<string, string>): Promise<SseConnection>;
  closeAll(): void;
} {
  const open: SseConnection[] = [];
  const closeAll = () => {
    for (const sse of open.splice(0)) sse.close();
  };
  afterAll(closeAll);
  return {
    connect: async (user, headers = {}) => {
      const sse = await openSse(service.baseUrl, { Authorization: user.auth, ...headers });
      open.push(sse);
      return sse;
    },
    closeAll,
  };
}
