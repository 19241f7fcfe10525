import type { Role, Scope } from '@task-service/client';
import type { AccessClaims, TokenRejection } from '../auth/tokens.js';
import { unauthenticated } from './errors.js';

/** The authenticated caller of a request. */
export interface Principal {
  userId: string;
  /** The session; for a personal access token, the token's id. */
  sessionId: string;
  /** The role this request acts with (a personal access token's owner is an admin here only with the `admin` scope). */
  role: Role;
  /** Set when the caller used a personal access token: what it may do, and its owner's role now. */
  token?: { id: string; scopes: Scope[]; ownerRole: Role };
}

declare module 'express-serve-static-core' {
  interface Request {
    /** Claims of a correctly signed bearer token, before its session is checked. */
    accessClaims?: AccessClaims;
    /** Why a bearer token that was sent is not accepted. */
    tokenRejection?: TokenRejection;
    principal?: Principal;
  }
}

export function principalOf(req: { principal?: Principal }): Principal {
  if (!req.principal) throw unauthenticated('A valid access token is required');
  return req.principal;
}

export const isAdmin = (p: Principal): boolean => p.role === 'admin';

/** The client's address as Express derives it (TRUST_PROXY decides whether X-Forwarded-For counts). */
export const clientAddress = (req: { ip?: string }): string => req.ip ?? 'unknown';
