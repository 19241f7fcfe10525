import { initServer } from '@ts-rest/express';
import { eventsContract } from '../../contract/events.js';
import type { AppContext } from '../context.js';
import { principalOf } from '../http/principal.js';
import { readChanges } from './changes.js';

export function eventsRouter(ctx: AppContext) {
  return initServer().router(eventsContract, {
    changes: async ({ query, req }) => ({ status: 200, body: await readChanges(ctx, principalOf(req), query) }),
  });
}
