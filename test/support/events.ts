import { sql } from 'kysely';
import { ChangesPageSchema, type Event, type EventType } from '../../contract/events.js';
import { rawQuery } from '../../server/db/query.js';
import type { TestService } from './app.js';

type Caller = { auth: string };

/**
 * Waits until every event written so far is below the feed's horizon. The horizon is the oldest
 * transaction running on the whole server, so other test files' work can hold it back a while.
 */
export async function feedSettled(service: TestService): Promise<void> {
  for (let waited = 0; waited < 20_000; waited += 50) {
    const row = await service.ctx.db.sql.first(
      rawQuery(sql<{ settled: boolean }>`
        SELECT (pg_snapshot_xmin(pg_current_snapshot())::text)::bigint > coalesce(max(txid), 0) AS settled FROM events`),
    );
    if (row?.settled) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the event feed did not settle within 20 s');
}

/**
 * Follows GET /changes from `cursor` until an empty page (after the feed settled, unless told not
 * to wait); returns every event and the last cursor.
 */
export async function readAllChanges(
  service: TestService,
  user: Caller,
  cursor?: string,
  limit = 100,
  { settle = true }: { settle?: boolean } = {},
): Promise<{ events: Event[]; cursor: string }> {
  if (settle) await feedSettled(service);
  const events: Event[] = [];
  let next = cursor;
  for (;;) {
    const res = await service.http
      .get('/changes')
      .query({ limit, ...(next === undefined ? {} : { cursor: next }) })
      .set('Authorization', user.auth)
      .expect(200);
    const page = ChangesPageSchema.parse(res.body);
    events.push(...page.items);
    next = page.nextCursor;
    if (page.items.length === 0) return { events, cursor: next };
  }
}

/** The events of one type, narrowed. */
export const ofType = <T extends EventType>(events: Event[], type: T): Extract<Event, { type: T }>[] =>
  events.filter((event): event is Extract<Event, { type: T }> => event.type === type);
