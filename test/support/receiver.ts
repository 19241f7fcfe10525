import http from 'node:http';
import { Webhook } from 'standardwebhooks';
import { EventSchema, type Event } from '../../contract/events.js';
import { listenOnLoopback } from './loopback.js';

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The body as received. */
  body: string;
  event: Event;
  /** Whether the signature verified with the secret registered for this path. */
  verified: boolean;
  at: number;
}

/** A webhook receiver on loopback that checks signatures and fails on purpose when told. */
export interface Receiver {
  url(path: string): string;
  /** The secret to verify requests to `path` with. */
  expect(path: string, secret: string): void;
  /** The status to answer the nth request (from 1) to `path` with; 204 by default. */
  answer(path: string, status: (nth: number) => number): void;
  received(path: string): Received[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const secrets = new Map<string, string>();
  const answers = new Map<string, (nth: number) => number>();
  const log: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = req.url ?? '/';
      const body = Buffer.concat(chunks).toString('utf8');
      const verified = (() => {
        try {
          new Webhook(secrets.get(path) ?? 'whsec_AAAA').verify(body, {
            'webhook-id': String(req.headers['webhook-id']),
            'webhook-timestamp': String(req.headers['webhook-timestamp']),
            'webhook-signature': String(req.headers['webhook-signature']),
          });
          return true;
        } catch {
          return false;
        }
      })();
      log.push({
        path,
        headers: req.headers,
        body,
        event: EventSchema.parse(JSON.parse(body)),
        verified,
        at: Date.now(),
      });
      const nth = log.filter((r) => r.path === path).length;
      res.statusCode = (answers.get(path) ?? (() => 204))(nth);
      res.end();
    });
  });
  const port = await listenOnLoopback(server);
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    expect: (path, secret) => secrets.set(path, secret),
    answer: (path, status) => answers.set(path, status),
    received: (path) => log.filter((r) => r.path === path),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
