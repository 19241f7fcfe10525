import { v7 as uuidv7 } from 'uuid';
import type { Event } from '../../contract/events.js';
import type { Prisma } from '../generated/prisma/client.js';

/** The PostgreSQL channel that wakes live streams and webhook workers on every instance. */
export const EVENTS_CHANNEL = 'task_service_events';

type Change = Event extends infer E ? (E extends Event ? Pick<E, 'type' | 'data'> : never) : never;

/** A change to record, with the users who may see it besides admins. */
export type OutboxEvent = Change & { audience: (string | null | undefined)[] };

/**
 * Writes events in the caller's transaction, so each exists exactly when its change commits, and
 * wakes the readers on every instance at commit (NOTIFY is delivered only then). One statement.
 */
export async function recordEvents(tx: Prisma.TransactionClient, actorId: string | null, events: OutboxEvent[]): Promise<void> {
  if (events.length === 0) return;
  const rows = events.map((event) => ({
    id: uuidv7(),
    type: event.type,
    data: event.data,
    audience: [...new Set(event.audience.filter((id): id is string => typeof id === 'string'))],
  }));
  await tx.$executeRaw`
    WITH rows AS (SELECT r, n FROM jsonb_array_elements(${JSON.stringify(rows)}::jsonb) WITH ORDINALITY AS t(r, n)),
    inserted AS (
      INSERT INTO events (id, type, occurred_at, actor_id, data, audience)
      SELECT (r->>'id')::uuid, r->>'type', statement_timestamp(), ${actorId}::uuid, r->'data',
             ARRAY(SELECT jsonb_array_elements_text(r->'audience'))::uuid[]
      FROM rows ORDER BY n
      RETURNING 1
    )
    SELECT pg_notify(${EVENTS_CHANNEL}, '') FROM (SELECT count(*) FROM inserted) AS done`;
}

/** Records one event in the caller's transaction (see recordEvents). */
export const recordEvent = (tx: Prisma.TransactionClient, actorId: string | null, event: OutboxEvent): Promise<void> =>
  recordEvents(tx, actorId, [event]);
