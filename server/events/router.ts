import { initServer } from '@ts-rest/express';
import { eventsContract } from '@task-service/client';
import type { AppContext } from '../context.js';
import { AppError, invalidField } from '../http/errors.js';
import { principalOf } from '../http/principal.js';
import { readChanges } from './changes.js';
import { positionSeenBy, readerOf } from './log.js';
import { streamSlots } from './stream-slots.js';
import { streamHub } from './streams.js';

/** How long a client refused a stream waits before it tries again. */
const STREAM_RETRY_AFTER_SECONDS = '30';

/** The oldest moment whose events are still kept. */
const retentionStartMs = (ctx: AppContext) => Date.now() - ctx.config.events.retentionDays * 86_400_000;

/**
 * Whether an event id (a UUIDv7) was minted before `ms`, read from the id itself: an id from before
 * the retention is answered 410 whoever's event it was, so the answer tells nothing of others' events.
 */
function mintedBefore(eventId: string, ms: number): boolean {
  const minted = Number.parseInt(eventId.replaceAll('-', '').slice(0, 12), 16);
  return Number.isFinite(minted) && minted < ms;
}

export function eventsRouter(ctx: AppContext) {
  const { maxStreamsPerUser } = ctx.config.events;
  return initServer().router(eventsContract, {
    changes: async ({ query, req }) => ({ status: 200, body: await readChanges(ctx, principalOf(req), query) }),

    stream: async ({ headers, req, res }) => {
      const principal = principalOf(req);
      const reader = readerOf(principal);
      const lastEventId = headers['last-event-id'];
      const resumeAfter = lastEventId === undefined ? undefined : await positionSeenBy(ctx, reader, lastEventId);
      if (lastEventId !== undefined && resumeAfter === undefined && mintedBefore(lastEventId, retentionStartMs(ctx))) {
        throw new AppError(
          'cursor_expired',
          'The event to resume after is past the retention: do a full sync, then open the stream without Last-Event-ID',
        );
      }
      // One answer for an unknown id and another user's: it tells nothing about others' events.
      if (lastEventId !== undefined && resumeAfter === undefined) {
        throw invalidField(
          'header.last-event-id',
          'unknown_event',
          'Not the id of an event this service sent you (or no longer retained): reconnect without Last-Event-ID after a full sync',
        );
      }
      const slots = streamSlots(ctx);
      const refusal = await slots.take(principal.userId);
      const retry = { headers: { 'Retry-After': STREAM_RETRY_AFTER_SECONDS } };
      if (refusal === 'user')
        throw new AppError(
          'rate_limited',
          `At most ${maxStreamsPerUser} open event streams per user: close one first`,
          retry,
        );
      if (refusal === 'instance')
        throw new AppError('unavailable', 'This instance serves all the event streams it can: retry later', retry);
      let stream: Awaited<ReturnType<ReturnType<typeof streamHub>['open']>>;
      try {
        stream = await streamHub(ctx).open(reader, principal.sessionId, resumeAfter, req.caller?.expiresAtMs);
      } catch (error) {
        slots.give(principal.userId);
        throw error;
      }
      res.once('close', () => {
        stream.close();
        slots.give(principal.userId);
      });
      req.socket.setTimeout(0); // a stream is quiet between heartbeats by design
      res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
      res.setHeader('X-Accel-Buffering', 'no'); // nginx: pass each event on at once
      res.status(200).flushHeaders();
      return { status: 200, body: stream.body };
    },
  });
}
