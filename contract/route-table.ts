// The client's run-time view of the contract (routes.ts), typed so that it cannot drift from it.
import type { AppRoute, AppRouter } from '@ts-rest/core';

/** What a call needs to know of its operation at run time. */
export interface RouteInfo {
  method: string;
  path: string;
  /** Sent without the access token. */
  public?: true;
  /** The body goes as multipart/form-data. */
  multipart?: true;
  /** A success answer that is not JSON, read as text or as a Blob. */
  read?: 'text' | 'blob';
}

/** For each operation of `R`, its method and path exactly as the contract has them. */
export type RouteTable<R extends AppRouter> = {
  readonly [K in keyof R]: R[K] extends AppRoute
    ? RouteInfo & { readonly method: R[K]['method']; readonly path: R[K]['path'] }
    : R[K] extends AppRouter
      ? RouteTable<R[K]>
      : never;
};
