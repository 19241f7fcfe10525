import { decodeJwt, SignJWT } from 'jose';
import { v7 as uuidv7 } from 'uuid';
import { z } from 'zod';
import type { TestService } from './app.js';

const SessionClaimsSchema = z.object({ sub: z.string(), sid: z.string(), role: z.string() });

export interface MintOptions {
  iss?: string;
  aud?: string;
  typ?: string;
  alg?: string;
  iat?: number;
  exp?: number;
  sid?: string;
  key?: Parameters<SignJWT['sign']>[0];
}

/**
 * An access token like the service's own for the session `accessToken` belongs to, with what
 * `options` names changed; signed with the service's key unless `options.key` says otherwise.
 */
export function mintAccessToken(service: TestService, accessToken: string, options: MintOptions = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const claims = SessionClaimsSchema.parse(decodeJwt(accessToken));
  const { issuer, audience } = service.ctx.config.jwt;
  return new SignJWT({ sid: options.sid ?? claims.sid, role: claims.role })
    .setProtectedHeader({ alg: options.alg ?? 'EdDSA', typ: options.typ ?? 'at+jwt', kid: service.ctx.signingKey.kid })
    .setIssuer(options.iss ?? issuer)
    .setAudience(options.aud ?? audience)
    .setSubject(claims.sub)
    .setIssuedAt(options.iat ?? now)
    .setExpirationTime(options.exp ?? now + 900)
    .setJti(uuidv7())
    .sign(options.key ?? service.ctx.signingKey.privateKey);
}

/** A correctly signed access token for the same session that expired well before now. */
export function expiredAccessToken(service: TestService, accessToken: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return mintAccessToken(service, accessToken, { iat: now - 1000, exp: now - 100 });
}
