import type { Request } from 'express';
import type { Logger } from 'pino';
import type { Config } from '../config.js';

/**
 * Behind a proxy with TRUST_PROXY unset, every client has the proxy's address, so the rate limit
 * and login throttle treat all users as one: say so once, when the first forwarded request arrives.
 */
export function warnUntrustedForwarding(ctx: {
  config: Pick<Config, 'trustProxy'>;
  logger: Logger;
}): (req: Request) => void {
  let warned = ctx.config.trustProxy !== false && ctx.config.trustProxy !== 0;
  return (req) => {
    if (!warned && req.headers['x-forwarded-for'] !== undefined) {
      warned = true;
      ctx.logger.warn(
        { remoteAddress: req.socket.remoteAddress },
        'A request came with X-Forwarded-For but TRUST_PROXY is unset: every client behind that proxy shares its address for rate limits and the login throttle. Set TRUST_PROXY to the number of proxies (or their addresses).',
      );
    }
  };
}
