import { isAppRoute, type AppRoute, type AppRouter } from '@ts-rest/core';

function flatten(router: AppRouter): AppRoute[] {
  return Object.values(router).flatMap((entry) => (isAppRoute(entry) ? [entry] : flatten(entry)));
}

/** For 404 versus 405: which methods the contract declares for a concrete path. */
export function methodsByPath(contract: AppRouter): (path: string) => string[] {
  const routes = flatten(contract).map((route) => ({
    method: route.method,
    pattern: new RegExp(`^${route.path.replace(/[.]/g, '\\.').replace(/:[A-Za-z_]+/g, '[^/]+')}/?$`),
  }));
  return (path) => {
    const methods = new Set<string>(routes.filter((r) => r.pattern.test(path)).map((r) => r.method));
    if (methods.has('GET')) methods.add('HEAD');
    return [...methods];
  };
}
