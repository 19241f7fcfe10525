import { initServer } from '@ts-rest/express';
import { eventsContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { principalOf } from '../http/principal.js';
import { cursorExpired, readChanges } from './changes.js';
import { positionOf, readerOf } from './log.js';
import { streamHub } from './streams.js';

export function eventsRouter(ctx: AppContext) {
  return initServer().router(eventsContract, {
    changes: async ({ query, req }) => ({ status: 200, body: await readChanges(ctx, principalOf(req), query) }),

    stream: async ({ headers, req, res }) => {
      const principal = principalOf(req);
      const lastEventId = headers['last-event-id'];
      // An event still in the log has nothing purged after it; one that is gone may have.
      const resumeAfter = lastEventId === undefined ? undefined : await positionOf(ctx, lastEventId);
      if (lastEventId !== undefined && resumeAfter === undefined) throw cursorExpired();
      const stream = await streamHub(ctx).open(readerOf(principal), principal.sessionId, resumeAfter);
      res.on('close', stream.close);
      req.socket.setTimeout(0); // a stream is quiet between heartbeats by design
      res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
      res.setHeader('X-Accel-Buffering', 'no'); // nginx: pass each event on at once
      res.status(200).flushHeaders();
      return { status: 200, body: stream.body };
    },
  });
}
