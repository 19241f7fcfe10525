import type { RequestHandler } from 'express';
import cors from 'cors';

/**
 * Lets browser front-ends on the configured origins call the API. Tokens travel in the
 * Authorization header, never in cookies, so credentials mode stays off.
 */
export function corsFor(origins: string[]): RequestHandler | undefined {
  if (origins.length === 0) return undefined;
  return cors({
    origin: origins.includes('*') ? '*' : origins,
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    allowedHeaders: [
      'Authorization',
      'Content-Type',
      'If-Match',
      'If-None-Match',
      'If-Range',
      'Range',
      'Idempotency-Key',
      'Last-Event-ID',
      'X-Request-Id',
    ],
    exposedHeaders: [
      'ETag',
      'Location',
      'Link',
      'X-Request-Id',
      'Retry-After',
      'RateLimit',
      'RateLimit-Policy',
      'Idempotent-Replayed',
      'Content-Disposition',
      'Content-Range',
      'Accept-Ranges',
      'WWW-Authenticate',
      'Allow',
    ],
    maxAge: 600,
  });
}
