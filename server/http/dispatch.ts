import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { IRoute } from 'express-serve-static-core';
import type { AppRouter } from '@ts-rest/core';
import { createExpressEndpoints, type TsRestExpressOptions } from '@ts-rest/express';

/** The operations' implementations, as createExpressEndpoints takes them (ts-rest does not export the type). */
type RouterImplementation<T extends AppRouter> = Parameters<typeof createExpressEndpoints<T>>[1];

type Step = (req: Request, res: Response, next: NextFunction) => unknown;

/** One segment of a route's path: a literal (lower case: Express matches paths case-insensitively) or a parameter. */
type Segment = { literal: string } | { param: string };

interface Endpoint {
  /** The Express route ts-rest built: the metrics label its requests by its path. */
  route: IRoute;
  method: string;
  segments: Segment[];
  /** ts-rest's chain for the operation: its route marker, the global middleware, the route's own, its handler. */
  steps: Step[];
}

const SEGMENT = /^(?::(\w+)|([A-Za-z0-9._~-]+))$/;

function segmentsOf(path: string): Segment[] {
  return path
    .slice(1)
    .split('/')
    .map((part) => {
      const [, param, literal] = SEGMENT.exec(part) ?? [];
      if (param !== undefined) return { param };
      if (literal !== undefined) return { literal: literal.toLowerCase() };
      throw new Error(`The contract path ${path} has a segment the dispatcher cannot match: ${part}`);
    });
}

/**
 * The request path's segments as Express's route patterns see them (`^/a/([^/]+)(?:/$)?$`): one
 * trailing slash allowed; undefined when no route can match (no leading slash, an empty segment).
 */
function requestSegments(path: string): string[] | undefined {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  if (!trimmed.startsWith('/')) return undefined;
  const parts = trimmed.slice(1).split('/');
  return parts.includes('') ? undefined : parts;
}

/** A parameter as Express decodes it: a malformed %-escape is the client's error (400). */
function decodedParam(value: string): string {
  if (!value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    throw Object.assign(new Error(`Failed to decode param '${value}'`), { status: 400 });
  }
}

/** The endpoint's parameters if `parts` fit its path (undefined if not); throws on an undecodable one. */
function paramsOf(endpoint: Endpoint, parts: string[]): Record<string, string> | undefined {
  const { segments } = endpoint;
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i];
    if (segment && 'literal' in segment) {
      const part = parts[i] ?? '';
      if (part.length !== segment.literal.length || part.toLowerCase() !== segment.literal) return undefined;
    }
  }
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i];
    if (segment && 'param' in segment) params[segment.param] = decodedParam(parts[i] ?? '');
  }
  return params;
}

/**
 * The endpoints a path may reach, in the order they were registered (the first that fits wins, as
 * in Express): looked up by the path's number of segments and its first segment.
 */
function endpointTable() {
  const byShape = new Map<number, { byFirst: Map<string, Endpoint[]>; paramFirst: Endpoint[] }>();
  return {
    add(endpoint: Endpoint): void {
      const shape = byShape.get(endpoint.segments.length) ?? { byFirst: new Map<string, Endpoint[]>(), paramFirst: [] };
      byShape.set(endpoint.segments.length, shape);
      const first = endpoint.segments[0];
      if (first && 'literal' in first) {
        const list = shape.byFirst.get(first.literal) ?? [...shape.paramFirst];
        list.push(endpoint);
        shape.byFirst.set(first.literal, list);
      } else {
        // A parameter first fits every first segment: it joins every list, in its turn.
        shape.paramFirst.push(endpoint);
        for (const list of shape.byFirst.values()) list.push(endpoint);
      }
    },
    candidates(parts: string[]): Endpoint[] | undefined {
      const shape = byShape.get(parts.length);
      if (!shape) return undefined;
      const first = (parts[0] ?? '').toLowerCase();
      return shape.byFirst.get(first) ?? shape.paramFirst;
    },
  };
}

/** Answers with no body: Express's own res.json drops the body of these (and a HEAD's). */
const NO_BODY_STATUSES = new Set([204, 205, 304]);

/**
 * An operation's JSON answer: a JSON text in UTF-8 with its length, as Express's res.json sends it.
 * Express's parses and formats the Content-Type again on every call, a fortieth of a small read's
 * CPU. The rarer answers still go its way: no body, a Content-Type already set, HEAD, a fresh
 * conditional GET, and one whose res.send is watched (the Idempotency-Key's keeper wraps it to
 * keep the answer with its change). It reads none of Express's JSON settings (replacer, spaces,
 * escape) nor its ETag setting: the app sets none of them (app.ts turns ETags off).
 */
function operationJson(this: Response, body: unknown): Response {
  const { req } = this;
  if (
    Object.hasOwn(this, 'send') ||
    body === undefined ||
    NO_BODY_STATUSES.has(this.statusCode) ||
    this.hasHeader('Content-Type') ||
    req.method === 'HEAD' ||
    req.fresh
  )
    return express.response.json.call(this, body);
  const text: unknown = JSON.stringify(body);
  // JSON.stringify answers undefined for what JSON cannot hold (a function): Express's way then.
  if (typeof text !== 'string') return express.response.json.call(this, body);
  this.setHeader('Content-Type', 'application/json; charset=utf-8');
  this.setHeader('Content-Length', Buffer.byteLength(text));
  this.end(text);
  return this;
}

/** Runs `steps` as an Express route does: in order, a thrown or rejected error passed on, `next('route')` leaves. */
function run(steps: Step[], req: Request, res: Response, done: (err?: unknown) => void): void {
  let index = 0;
  const next = (err?: unknown): void => {
    if (err === 'route') return done();
    if (err !== undefined && err !== null && err !== false) return done(err);
    const step = steps[index++];
    if (!step) return done();
    try {
      const result = step(req, res, next);
      if (result instanceof Promise) result.catch((error: unknown) => next(error ?? new Error('Rejected promise')));
    } catch (error) {
      next(error);
    }
  };
  next();
}

/**
 * The contract's operations as one middleware: ts-rest builds each operation's chain (request
 * validation, the global and the route's middleware, the handler, response validation) as for
 * Express, and a request finds its operation by one lookup (its path's length and first segment),
 * instead of Express trying every registered route's pattern in turn. Matching is Express's:
 * literal segments case-insensitive, one trailing slash allowed, parameters %-decoded (400 when
 * malformed, as soon as a route of any method fits the path), the first registered route wins and
 * HEAD is served by GET. A request no operation takes goes on to the app's next layers.
 */
export function contractEndpoints<T extends AppRouter>(
  contract: T,
  implementation: RouterImplementation<T>,
  options: Omit<TsRestExpressOptions<T>, 'requestValidationErrorHandler'>,
): RequestHandler {
  // ts-rest registers on a router of its own, which is never mounted: only its routes are read.
  const registrar = express.Router();
  // Validation errors go on to the app's error handler, like every other error.
  createExpressEndpoints(contract, implementation, registrar, {
    ...options,
    requestValidationErrorHandler: (err, _req, _res, next) => next(err),
  });
  const table = endpointTable();
  for (const layer of registrar.stack) {
    const route = layer.route;
    if (!route) continue; // ts-rest's validation-error layer, which passes every error on
    const steps = route.stack.map((step) => step.handle);
    const method = route.stack[0]?.method;
    if (method === undefined || steps.some((step) => step.length > 3))
      throw new Error(`Unexpected handlers on the contract route ${route.path}`);
    table.add({ route, method: method.toUpperCase(), segments: segmentsOf(route.path), steps });
  }

  return (req, res, next) => {
    const parts = requestSegments(req.path);
    const candidates = parts && table.candidates(parts);
    if (!parts || !candidates) return next();
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    let index = 0;
    const tryNext = (err?: unknown): void => {
      if (err !== undefined) return next(err);
      while (index < candidates.length) {
        const endpoint = candidates[index++];
        if (!endpoint) break;
        let params: Record<string, string> | undefined;
        try {
          params = paramsOf(endpoint, parts);
        } catch (error) {
          // Express decodes a route's parameters when its pattern fits, before it looks at the method.
          return next(error);
        }
        if (params === undefined || endpoint.method !== method) continue;
        req.params = params;
        req.route = endpoint.route;
        res.json = operationJson;
        return run(endpoint.steps, req, res, tryNext);
      }
      next();
    };
    tryNext();
  };
}
