import type { AppContext } from '../context.js';

/**
 * One `T` per service instance (per AppContext), made on first use: the event system's shared
 * pieces (listener, stream hub, metrics) without adding fields to the context every part builds.
 */
export function perInstance<T>(create: (ctx: AppContext) => T): (ctx: AppContext) => T {
  const made = new WeakMap<AppContext, T>();
  return (ctx) => {
    let value = made.get(ctx);
    if (value === undefined) {
      value = create(ctx);
      made.set(ctx, value);
    }
    return value;
  };
}
