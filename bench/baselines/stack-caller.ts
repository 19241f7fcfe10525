// Who calls the stack baseline, as the service decides it on every request: the access token verified
// with jose (EdDSA, issuer, audience, typ), then its session read with the user's role (one query).
import { importJWK, jwtVerify } from 'jose';
import type pg from 'pg';
import type { StackConfig } from './stack-config.js';

export interface Caller {
  userId: string;
  role: string;
}

interface SessionRow {
  user_id: string;
  revoked_at: Date | null;
  role: string;
}

const SESSION =
  'SELECT s.user_id, s.revoked_at, u.role FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1';

/** The caller of a request from its Authorization header, or undefined for a bad token or an ended session. */
export async function callerCheck(
  config: StackConfig,
  pool: pg.Pool,
): Promise<(authorization: string | undefined) => Promise<Caller | undefined>> {
  const key = await importJWK(config.jwk, 'EdDSA');
  return async (authorization) => {
    const token = /^Bearer (.+)$/.exec(authorization ?? '')?.[1];
    if (!token) return undefined;
    const { payload } = await jwtVerify(token, key, {
      algorithms: ['EdDSA'],
      issuer: config.issuer,
      audience: config.audience,
      typ: 'at+jwt',
      requiredClaims: ['sub', 'sid', 'role', 'iat', 'exp', 'jti'],
    }).catch(() => ({ payload: undefined }));
    const sid = payload?.sid;
    if (typeof sid !== 'string' || typeof payload?.sub !== 'string') return undefined;
    const { rows } = await pool.query<SessionRow>(SESSION, [sid]);
    const session = rows[0];
    if (!session || session.revoked_at || session.user_id !== payload.sub) return undefined;
    return { userId: session.user_id, role: session.role };
  };
}
