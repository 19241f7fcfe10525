import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { TsRestRequest } from '@ts-rest/express';
import { isAppRouteNoBody, type AppRoute } from '@ts-rest/core';
import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { randomFillSync } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { isPublicRoute } from '@task-service/client';
import { AppError, unauthenticated, validationFailed } from './errors.js';
import { clientAddress, type AudienceOf, type Authenticate } from './principal.js';

/** Middleware that runs for every contract route, after the route is known. */
type RouteMiddleware = <R extends AppRoute>(req: TsRestRequest<R>, res: Response, next: NextFunction) => void;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

// The random bits of request ids, drawn 256 ids at a time: uuid's own source asks WebCrypto for
// every id, a fiftieth of a small read's CPU.
const randomPool = Buffer.alloc(16 * 256);
let drawn = randomPool.length;
const sixteenRandomBytes = (): Uint8Array => {
  if (drawn === randomPool.length) {
    randomFillSync(randomPool);
    drawn = 0;
  }
  drawn += 16;
  return randomPool.subarray(drawn - 16, drawn);
};

/** Echoes a well-formed incoming X-Request-Id, else makes one (a UUIDv7: ids sort by time in the logs). */
export function requestId(req: Request, res: Response): string {
  const incoming = req.headers['x-request-id'];
  const id =
    typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : uuidv7({ random: sixteenRandomBytes() });
  res.setHeader('X-Request-Id', id);
  return id;
}

/**
 * Finds the caller once, for the rate limit and then for authentication: only a live credential's
 * requests are its user's; a revoked token's are its address's.
 */
export function identifyCaller(authenticate: Authenticate, audienceOf: AudienceOf): RequestHandler {
  return (req, _res, next) => {
    audienceOf(req)
      .then((audience) => authenticate(req.headers.authorization, audience))
      .then((caller) => {
        req.caller = caller;
        req.principal = caller.principal;
        next();
      }, next);
  };
}

/** A contract route's request, once its route is known. */
type RouteRequest = <R extends AppRoute>(req: TsRestRequest<R>) => AppError | undefined;

/**
 * Every route not marked public in the contract needs the live session or personal access token
 * identifyCaller found; a personal access token also needs the scope the route declares.
 */
const authenticationRefusal: RouteRequest = (req) => {
  if (isPublicRoute(req.tsRestRoute)) return undefined;
  return req.caller ? req.caller.refusal(req.tsRestRoute) : unauthenticated('An access token is required');
};

/** An operation that takes no query parameters rejects any, as those that take some reject unknown ones. */
const unexpectedQueryRefusal: RouteRequest = (req) => {
  // Without a `?` the query is empty: no need to parse it here.
  if (req.tsRestRoute.query || !req.url.includes('?')) return undefined;
  const unexpected = Object.keys(req.query);
  if (unexpected.length === 0) return undefined;
  return validationFailed(
    unexpected.map((name) => ({
      path: `query.${name}`,
      code: 'unrecognized_keys',
      message: 'This operation takes no query parameters',
    })),
  );
};

const JSON_TYPES = ['application/json', 'application/merge-patch+json'];

const hasBody = (req: Request): boolean =>
  req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;

/** A body must come in the media type its operation takes (415 otherwise). */
const mediaTypeRefusal: RouteRequest = (req) => {
  const route = req.tsRestRoute;
  if (route.method === 'GET' || !hasBody(req)) return undefined;
  if (route.method !== 'DELETE' && route.contentType === 'multipart/form-data') {
    return req.is('multipart/form-data')
      ? undefined
      : new AppError('unsupported_media_type', 'Send the file as multipart/form-data');
  }
  if ('body' in route && isAppRouteNoBody(route.body)) return undefined;
  // JSON merge patch (RFC 7396) is the semantics of PATCH only.
  const accepted = route.method === 'PATCH' ? JSON_TYPES : ['application/json'];
  return req.is(accepted)
    ? undefined
    : new AppError('unsupported_media_type', `Send the body as ${accepted.join(' or ')}`);
};

/**
 * What every contract route checks before its handler, in this order: authentication, unexpected
 * query parameters, the body's media type. Then conditional GETs are kept only where the contract
 * offers a 304 (tasks, attachment content): elsewhere Express's freshness check would answer
 * `If-None-Match: *` with a 304 the contract does not declare. One layer for all four, as each
 * Express layer costs every request its turn through the router.
 */
export const contractRules: RouteMiddleware = (req, _res, next) => {
  const refused = authenticationRefusal(req) ?? unexpectedQueryRefusal(req) ?? mediaTypeRefusal(req);
  if (refused) return next(refused);
  if (!(304 in req.tsRestRoute.responses)) {
    delete req.headers['if-none-match'];
    delete req.headers['if-modified-since'];
  }
  next();
};

const declaredCharset = (req: Request): string | undefined =>
  /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(req.headers['content-type'] ?? '')?.[1]?.toLowerCase();

/**
 * JSON bodies, parsed by `parse`. A JSON body is UTF-8 (RFC 8259 §8.1): one declared in any other
 * charset is 415 before it is decoded, so `+ADw-script+AD4-` in UTF-7 never becomes `<script>`.
 * A request that announces no body (most are GETs) passes straight on.
 */
export const jsonBodies =
  (parse: RequestHandler): RequestHandler =>
  (req, res, next) => {
    // No body announced at all: nothing to check or parse (body-parser reads even a Content-Length: 0).
    if (req.headers['transfer-encoding'] === undefined && req.headers['content-length'] === undefined) return next();
    const charset = hasBody(req) && req.is(JSON_TYPES) ? declaredCharset(req) : undefined;
    if (charset !== undefined && charset !== 'utf-8')
      return next(new AppError('unsupported_media_type', `JSON bodies must be UTF-8, not ${charset}`));
    parse(req, res, next);
  };

const SERVICE_PROBES = new Set(['/healthz', '/readyz', '/metrics']);

/** The health probes and the metrics scrape: never rate limited, logged at debug (docs/operations.md). */
export const isServiceProbe = (req: { url?: string }): boolean => {
  const url = req.url ?? '';
  const query = url.indexOf('?');
  return SERVICE_PROBES.has(query === -1 ? url : url.slice(0, query));
};

/**
 * A general request budget per user (or per address without a valid token), counted where the
 * configuration says (server/limits). Sends the RateLimit and RateLimit-Policy headers.
 */
export function rateLimit(limiter: RateLimiterAbstract): RequestHandler {
  const perMinute = limiter.points;
  const policy = `"default";q=${perMinute};w=${limiter.duration}`;
  const setHeaders = (res: Response, result: RateLimiterRes) => {
    res.setHeader('RateLimit-Policy', policy);
    res.setHeader('RateLimit', `"default";r=${result.remainingPoints};t=${Math.ceil(result.msBeforeNext / 1000)}`);
  };
  return (req, res, next) => {
    if (isServiceProbe(req)) return next();
    // Counted before authentication, so bad tokens and unknown paths spend the budget too.
    const key = req.principal ? `user:${req.principal.userId}` : `ip:${clientAddress(req)}`;
    limiter.consume(key).then(
      (result) => {
        setHeaders(res, result);
        next();
      },
      (rejection: unknown) => {
        if (!(rejection instanceof RateLimiterRes)) return next(rejection);
        setHeaders(res, rejection);
        const retryAfter = String(Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)));
        next(
          new AppError('rate_limited', `At most ${perMinute} requests a minute`, {
            headers: { 'Retry-After': retryAfter },
          }),
        );
      },
    );
  };
}

/** The headers of every answer but a CORS preflight's: never cached, never sniffed. */
export const noStore = (res: Response): void => {
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
};
