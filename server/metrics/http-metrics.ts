import type { Request, RequestHandler } from 'express';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

const LABELS = ['method', 'route', 'status'] as const;
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
  /** Counts and times every request when its response ends. */
  record: RequestHandler;
}

export function httpMetrics(): HttpMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered',
    labelNames: LABELS,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from receiving a request to the end of its response',
    labelNames: LABELS,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });

  const record: RequestHandler = (req, res, next) => {
    const stopTimer = duration.startTimer();
    // 'close' also fires when the client goes away before the response is finished.
    res.once('close', () => {
      const labels = { method: req.method, route: routeTemplate(req), status: String(res.statusCode) };
      requests.inc(labels);
      stopTimer(labels);
    });
    next();
  };
  return { registry, record };
}
