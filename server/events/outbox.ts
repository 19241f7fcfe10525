import { v7 as uuidv7 } from 'uuid';
import { EVENT_TYPES, grantsScope, SCOPES, scopeToReadEvent, type Event } from '@task-service/client';
import type { SqlSession } from '../db/sql.js';
import { activityWrites, taskOfEvent } from './activity.js';

/** The PostgreSQL channel that wakes live streams and webhook workers on every instance. */
export const EVENTS_CHANNEL = 'task_service_events';

// A UUIDv7 made in SQL (PostgreSQL 15 has no function for it): 48 bits of milliseconds, then random bits, version 7.
export const UUIDV7_SQL = `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send(floor(extract(epoch from clock_timestamp()) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`;

/**
 * Per event type, the scopes any one of which lets a webhook receive it (scopeToReadEvent): a
 * VALUES list made of constants only.
 */
const READING_SCOPES = EVENT_TYPES.map((type) => {
  const needed = scopeToReadEvent(type);
  const granting = SCOPES.filter((scope) => needed !== undefined && grantsScope([scope], needed));
  return `('${type}', ARRAY[${granting.map((scope) => `'${scope}'`).join(', ')}]::text[])`;
}).join(', ');

/**
 * The project an event of `new_events` belongs to, whose current members read it (server/events/log.ts):
 * a project's own events but its deletion (nobody is a member any more: its audience names them), a
 * project tag's, and a project task's with its attachments'. Read from the event's data, or from the
 * tag or task it names as the statement found them (a deleted one included): its attachments',
 * comments' and relations' events name their task (a relation's: the one it was made on or removed
 * from). A task.updated written
 * as a stub gets its task's project when settled (settleTaskEvents), as a move may change it.
 */
const EVENT_PROJECT = `(CASE
      WHEN type = 'project.deleted' THEN NULL
      WHEN type LIKE 'project.%' THEN COALESCE(data ->> 'projectId', data -> 'project' ->> 'id')::uuid
      WHEN type LIKE 'tag.%' THEN COALESCE((data -> 'tag' ->> 'projectId')::uuid,
        (SELECT tags.project_id FROM tags WHERE tags.id = (data ->> 'tagId')::uuid))
      WHEN data ? 'task' THEN (data -> 'task' ->> 'projectId')::uuid
      ELSE (SELECT tasks.project_id FROM tasks WHERE tasks.id = ${taskOfEvent('data')})
    END)`;

/**
 * The CTEs that write the events of a CTE named `new_events` (id uuid, type text, data jsonb,
 * audience uuid[], actor_id uuid, n: their order), with a first delivery attempt, due now, for each
 * webhook whose owner may see the event and whose scopes may read it, and the activity of the tasks
 * they concern (activity.ts). Plain SQL without parameters,
 * so that recordEvents and the pipelined writes (server/tasks/store.ts) write events the one way.
 */
export const EVENT_WRITES = `
    inserted AS (
      INSERT INTO events (id, type, occurred_at, actor_id, data, audience, project_id)
      SELECT id, type, statement_timestamp(), actor_id, data, audience, ${EVENT_PROJECT} FROM new_events ORDER BY n
      RETURNING id, type, audience, project_id, data, actor_id, occurred_at
    ),
    ${activityWrites('inserted')},
    deliveries AS (
      INSERT INTO webhook_deliveries (id, webhook_id, event_id, event_type, attempt, state, next_attempt_at)
      SELECT ${UUIDV7_SQL}, w.id, i.id, i.type, 1, 'pending', statement_timestamp()
      FROM inserted i
      JOIN webhooks w ON w.active AND (i.type = ANY(w.events) OR '*' = ANY(w.events))
      JOIN users u ON u.id = w.owner_id
      JOIN (VALUES ${READING_SCOPES}) AS reading(type, scopes) ON reading.type = i.type AND w.scopes && reading.scopes
      WHERE u.role = 'admin' OR w.owner_id = ANY(i.audience)
        OR EXISTS (SELECT 1 FROM project_members pm WHERE pm.project_id = i.project_id AND pm.user_id = w.owner_id)
        -- The membership these two make is written by the same statement, which cannot see it yet:
        -- the creator and the added member are named here.
        OR (i.type = 'project.created' AND w.owner_id = i.actor_id)
        OR (i.type = 'project.member_added' AND w.owner_id = (i.data -> 'member' ->> 'userId')::uuid)
    )`;

type Change = Event extends infer E ? (E extends Event ? Pick<E, 'type' | 'data'> : never) : never;

/** A change to record, with the users who may see it besides admins. */
export type OutboxEvent = Change & { audience: (string | null | undefined)[] };

/**
 * Writes events in the caller's transaction, so each exists exactly when its change commits, with
 * a first delivery attempt for each webhook that receives it, and wakes the readers on every
 * instance at commit (NOTIFY is delivered only then).
 *
 * The events' position is the id of a subtransaction begun here, not the transaction's own id: a
 * transaction that waited for a row lock may have been given its id before the wait, earlier than
 * the lock holder that commits first. The subtransaction's id is given now, with the caller's locks
 * held, so writers of one row are placed in the order they commit. It is above the transaction's
 * own id, so the feed's horizon (the oldest running transaction) still stops below it until commit.
 */
export async function recordEvents(tx: SqlSession, actorId: string | null, events: OutboxEvent[]): Promise<void> {
  if (events.length === 0) return;
  await tx.exec('SAVEPOINT record_events');
  await insertEvents(tx, actorId, events);
  await tx.exec('RELEASE SAVEPOINT record_events');
}

// The subtransaction's full id: its 32 bits (xmin of the rows it wrote) in the transaction's epoch,
// or the next one if the counter wrapped in between (a subtransaction's id is never below its parent's).
const SUBTRANSACTION_ID = `((pg_current_xact_id()::text::bigint >> 32) << 32) + xmin::text::bigint
   + CASE WHEN xmin::text::bigint < (pg_current_xact_id()::text::bigint & 4294967295) THEN 4294967296 ELSE 0 END`;

/** Places the events with these ids ($1) written in the current subtransaction at its id. */
export const PLACE_EVENTS = `UPDATE events SET txid = ${SUBTRANSACTION_ID} WHERE id = ANY($1::uuid[])`;

/** The transaction's events not placed yet: still at the transaction's own id, the column's default. */
export const UNPLACED_EVENTS = `txid = pg_current_xact_id()::text::bigint`;

/**
 * Places every event written in the current subtransaction at its id, as PLACE_EVENTS does, for
 * writes whose events have ids made in SQL (one per task a tag is on): the transaction's events
 * not placed yet are exactly those.
 */
export const PLACE_NEW_EVENTS = `UPDATE events SET txid = ${SUBTRANSACTION_ID} WHERE ${UNPLACED_EVENTS}`;

// The events as one jsonb array ($1), in their order, by the actor $2: the SQL of EVENT_WRITES is
// shared with the pipelined writes, so this statement is written out as they are.
const INSERT_EVENTS = `
    WITH rows AS (SELECT r, n FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS t(r, n)),
    new_events AS (
      SELECT (r->>'id')::uuid AS id, r->>'type' AS type, r->'data' AS data,
             ARRAY(SELECT jsonb_array_elements_text(r->'audience'))::uuid[] AS audience, $2::uuid AS actor_id, n
      FROM rows
    ),
    ${EVENT_WRITES}
    SELECT count(*) FROM inserted`;

async function insertEvents(tx: SqlSession, actorId: string | null, events: OutboxEvent[]): Promise<void> {
  const rows = events.map((event) => ({
    id: uuidv7(),
    type: event.type,
    data: event.data,
    audience: [...new Set(event.audience.filter((id): id is string => typeof id === 'string'))],
  }));
  await tx.rows(INSERT_EVENTS, [JSON.stringify(rows), actorId]);
  await tx.rows(PLACE_EVENTS, [rows.map((row) => row.id)]);
}

/** Records one event in the caller's transaction (see recordEvents). */
export const recordEvent = (tx: SqlSession, actorId: string | null, event: OutboxEvent): Promise<void> =>
  recordEvents(tx, actorId, [event]);
