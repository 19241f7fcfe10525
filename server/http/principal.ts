import type { AppRoute } from '@ts-rest/core';
import type { Role, Scope } from '@task-service/client';
import { unauthenticated, type AppError } from './errors.js';

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

/** What a request's credentials say of its caller (the app's Authenticate decides how). */
export interface Caller {
  principal: Principal | undefined;
  /** When the credential stops being valid, if it says (a login's access token). */
  expiresAtMs: number | undefined;
  /** The 401 for a request that needs a caller and has none, saying why (no token, expired, ended…). */
  unauthenticated(): AppError;
  /** Why this caller may not call `route` (a 401 without a principal, a token's missing scope), if not. */
  refusal(route: AppRoute): AppError | undefined;
}

/** What a request is for: the MCP endpoint (and the REST calls its tools make) or the REST interface. */
export type RequestAudience = 'mcp' | 'rest';

/** Finds the caller of a request from its Authorization header; an OAuth token holds only for its audience. */
export type Authenticate = (authorization: string | undefined, audience: RequestAudience) => Promise<Caller>;

/** Tells which audience a request is for (the MCP endpoint, or a call its tools make, is `mcp`). */
export type AudienceOf = (req: {
  path: string;
  headers: Record<string, string | string[] | undefined>;
}) => Promise<RequestAudience>;

declare module 'express-serve-static-core' {
  interface Request {
    caller?: Caller;
    principal?: Principal;
  }
}

export function principalOf(req: { principal?: Principal }): Principal {
  if (!req.principal) throw unauthenticated('A valid access token is required');
  return req.principal;
}

/** The request's caller, or the 401 that says why there is none. */
export function callerOf(req: { principal?: Principal; caller?: Caller }): Principal {
  if (req.principal) return req.principal;
  throw req.caller?.unauthenticated() ?? unauthenticated('A valid access token is required');
}

export const isAdmin = (p: Principal): boolean => p.role === 'admin';

/** The client's address as Express derives it (TRUST_PROXY decides whether X-Forwarded-For counts). */
export const clientAddress = (req: { ip?: string }): string => req.ip ?? 'unknown';
