import { randomBytes, createHash } from 'node:crypto';
// jose's subpaths: its entry point would load all of it (JWE, JWKS, ...).
import { JWTExpired } from 'jose/errors';
import { SignJWT } from 'jose/jwt/sign';
import { jwtVerify } from 'jose/jwt/verify';
import { LRUCache } from 'lru-cache';
import { v7 as uuidv7 } from 'uuid';
import { z } from 'zod';
import { RoleSchema, type Role } from '@task-service/client';
import { SIGNING_ALGORITHM, type SigningKey } from './keys.js';

export const ACCESS_TOKEN_TYPE = 'at+jwt';

export interface AccessTokenSettings {
  issuer: string;
  audience: string;
  accessTokenTtlSeconds: number;
}

export interface AccessClaims {
  userId: string;
  sessionId: string;
  role: Role;
  /** When the token expires (epoch milliseconds): a live stream it opened ends then. */
  expiresAtMs?: number;
}

/** Why a bearer token was refused: the 401's detail and its RFC 6750 error description say which. */
export type TokenRejection =
  | 'expired'
  | 'invalid'
  | 'token_expired'
  | 'token_unknown'
  | 'token_malformed'
  | 'oauth_expired'
  | 'oauth_unknown'
  | 'oauth_malformed'
  | 'oauth_audience';
export type TokenCheck = { claims: AccessClaims } | { rejected: TokenRejection };

const ClaimsSchema = z.object({ sub: z.string().uuid(), sid: z.string().uuid(), role: RoleSchema, exp: z.number() });

/** Tokens verified recently, per process: a client sends the same token with every request for its lifetime. */
const VERIFIED_TOKENS_KEPT = 10_000;

export function accessTokens(key: SigningKey, settings: AccessTokenSettings) {
  // Verifying a signature costs more than the rest of a small request. A token that passed is kept
  // until its own expiry (never longer), so a cached answer is the answer verification would give;
  // whether its session is still live is checked on every request all the same.
  const verified = new LRUCache<string, AccessClaims>({ max: VERIFIED_TOKENS_KEPT });

  /** Pins algorithm, issuer, audience and type (RFC 8725); tells an expired token from any other failure. */
  const check = async (token: string): Promise<TokenCheck> => {
    const known = verified.get(token);
    if (known) return { claims: { ...known } };
    try {
      const { payload } = await jwtVerify(token, key.publicKey, {
        algorithms: [SIGNING_ALGORITHM],
        issuer: settings.issuer,
        audience: settings.audience,
        typ: ACCESS_TOKEN_TYPE,
        requiredClaims: ['sub', 'sid', 'role', 'iat', 'exp', 'jti'],
      });
      const parsed = ClaimsSchema.safeParse(payload);
      if (!parsed.success) return { rejected: 'invalid' };
      const claims: AccessClaims = {
        userId: parsed.data.sub,
        sessionId: parsed.data.sid,
        role: parsed.data.role,
        expiresAtMs: parsed.data.exp * 1000,
      };
      const ttl = parsed.data.exp * 1000 - Date.now();
      if (ttl > 0) verified.set(token, claims, { ttl });
      return { claims };
    } catch (error) {
      // jose checks the signature and the pinned header before the expiry: an expired token is otherwise genuine.
      return { rejected: error instanceof JWTExpired ? 'expired' : 'invalid' };
    }
  };

  return {
    ttlSeconds: settings.accessTokenTtlSeconds,

    issue: (claims: AccessClaims): Promise<string> =>
      new SignJWT({ sid: claims.sessionId, role: claims.role })
        .setProtectedHeader({ alg: SIGNING_ALGORITHM, typ: ACCESS_TOKEN_TYPE, kid: key.kid })
        .setIssuer(settings.issuer)
        .setAudience(settings.audience)
        .setSubject(claims.userId)
        .setIssuedAt()
        .setExpirationTime(`${settings.accessTokenTtlSeconds}s`)
        .setJti(uuidv7())
        .sign(key.privateKey),

    check,

    /** The claims of a token that passes every check, else undefined. */
    verify: async (token: string): Promise<AccessClaims | undefined> => {
      const checked = await check(token);
      return 'claims' in checked ? checked.claims : undefined;
    },
  };
}
export type AccessTokens = ReturnType<typeof accessTokens>;

/** An opaque refresh token: 256 bits of randomness. */
export const newRefreshToken = (): string => randomBytes(32).toString('base64url');
/** Refresh tokens are stored only as this hash. */
export const hashRefreshToken = (token: string): string => createHash('sha256').update(token).digest('hex');
