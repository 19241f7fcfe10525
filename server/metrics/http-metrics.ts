import type { Request, Response } from 'express';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

const LABELS = ['method', 'route', 'status'] as const;
type Label = (typeof LABELS)[number];
type Labels = Record<Label, string>;
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * The route a request matched, as its path template (`/tasks/:task_id`), or "unmatched": never the
 * raw URL, so ids do not multiply the label values. Contract routes are registered under the
 * contract's own path, so Express's matched route is that template.
 */
export function routeTemplate(req: Request): string {
  const template: unknown = req.route?.path;
  return typeof template === 'string' ? template : 'unmatched';
}

export interface HttpMetrics {
  /** One registry per app, so tests can build many apps in one process. */
  registry: Registry;
  /** Counts and times a request whose response has ended (or whose client went away), `seconds` after it came. */
  record(req: Request, res: Response, seconds: number): void;
}

export function httpMetrics(): HttpMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // Each series' count and histogram child, found once: prom-client hashes the labels object on
  // every call otherwise. As many as the label values, which are bounded (methods, route templates,
  // status codes).
  const series = new Map<string, { labels: Labels; count: number; time: Histogram.Internal<Label> }>();
  new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered',
    labelNames: LABELS,
    registers: [registry],
    // Counted as a plain number per request and handed over when scraped: prom-client's own count
    // hashes the labels each time, a hundredth of a small read's CPU.
    collect() {
      this.reset();
      for (const { labels, count } of series.values()) this.inc(labels, count);
    },
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from receiving a request to the end of its response',
    labelNames: LABELS,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });

  const record = (req: Request, res: Response, seconds: number) => {
    const route = routeTemplate(req);
    const key = `${req.method} ${route} ${res.statusCode}`;
    let one = series.get(key);
    if (!one) {
      const labels = { method: req.method, route, status: String(res.statusCode) };
      one = { labels, count: 0, time: duration.labels(labels) };
      series.set(key, one);
    }
    one.count++;
    one.time.observe(seconds);
  };
  return { registry, record };
}
