// Who calls the stack baseline, as the service decides it on every request: the access token verified
// with jose (EdDSA, issuer, audience, typ) once per token and kept until it expires (as the service's
// server/security/tokens.ts keeps it), then its live session and the user's role read (the service's
// statement, server/auth/sessions.ts livePrincipal).
import { importJWK, jwtVerify } from 'jose';
import type { StackConfig } from './stack-config.js';
import type { StackDb } from './stack-db.js';

export interface Caller {
  userId: string;
  role: string;
}

interface Claims {
  userId: string;
  sessionId: string;
  expiresAtMs: number;
}

const SESSION =
  'SELECT u.role FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1 AND s.user_id = $2 AND s.revoked_at IS NULL';

/** Tokens kept once verified: as many as the service keeps. */
const KEPT = 10_000;

/** The caller of a request from its Authorization header, or undefined for a bad token or an ended session. */
export async function callerCheck(
  config: StackConfig,
  db: StackDb,
): Promise<(authorization: string | undefined) => Promise<Caller | undefined>> {
  const key = await importJWK(config.jwk, 'EdDSA');
  const verified = new Map<string, Claims>();
  const claimsOf = async (token: string): Promise<Claims | undefined> => {
    const known = verified.get(token);
    if (known && known.expiresAtMs > Date.now()) return known;
    const { payload } = await jwtVerify(token, key, {
      algorithms: ['EdDSA'],
      issuer: config.issuer,
      audience: config.audience,
      typ: 'at+jwt',
      requiredClaims: ['sub', 'sid', 'role', 'iat', 'exp', 'jti'],
    }).catch(() => ({ payload: undefined }));
    if (typeof payload?.sid !== 'string' || typeof payload.sub !== 'string' || typeof payload.exp !== 'number')
      return undefined;
    const claims = { userId: payload.sub, sessionId: payload.sid, expiresAtMs: payload.exp * 1000 };
    if (verified.size >= KEPT) verified.clear();
    verified.set(token, claims);
    return claims;
  };
  return async (authorization) => {
    const token = /^Bearer (.+)$/i.exec(authorization ?? '')?.[1];
    const claims = token === undefined ? undefined : await claimsOf(token);
    if (!claims) return undefined;
    const { rows } = await db.query<{ role: string }>(SESSION, [claims.sessionId, claims.userId]);
    const role = rows[0]?.role;
    return role === undefined ? undefined : { userId: claims.userId, role };
  };
}
