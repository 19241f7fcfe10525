import { randomBytes, createHash } from 'node:crypto';
import { jwtVerify, SignJWT } from 'jose';
import { v7 as uuidv7 } from 'uuid';
import { z } from 'zod';
import { RoleSchema, type Role } from '../../contract/users.js';
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
}

const ClaimsSchema = z.object({ sub: z.string().uuid(), sid: z.string().uuid(), role: RoleSchema });

export function accessTokens(key: SigningKey, settings: AccessTokenSettings) {
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

    /** Pins algorithm, issuer, audience and type (RFC 8725); undefined for any token that fails. */
    verify: async (token: string): Promise<AccessClaims | undefined> => {
      try {
        const { payload } = await jwtVerify(token, key.publicKey, {
          algorithms: [SIGNING_ALGORITHM],
          issuer: settings.issuer,
          audience: settings.audience,
          typ: ACCESS_TOKEN_TYPE,
          requiredClaims: ['sub', 'sid', 'role', 'iat', 'exp', 'jti'],
        });
        const claims = ClaimsSchema.safeParse(payload);
        return claims.success ? { userId: claims.data.sub, sessionId: claims.data.sid, role: claims.data.role } : undefined;
      } catch {
        return undefined;
      }
    },
  };
}
export type AccessTokens = ReturnType<typeof accessTokens>;

/** An opaque refresh token: 256 bits of randomness. */
export const newRefreshToken = (): string => randomBytes(32).toString('base64url');
/** Refresh tokens are stored only as this hash. */
export const hashRefreshToken = (token: string): string => createHash('sha256').update(token).digest('hex');
