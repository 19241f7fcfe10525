import { sql } from 'kysely';
import { ChangesPageSchema, type Event, type EventType } from '../../contract/events.js';
import { rawQuery } from '../../server/db/query.js';
import type { TestService } from './app.js';
import { createTask } from './tasks.js';

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

/**
 * Changes whose `task.updated` events carry exactly the fields they changed in `previous`: a PATCH
 * of two fields (a third sent unchanged), then a subtask made and done, each moving its parent's
 * counts. Answers how many events they make, and each `task.updated` as [task id, previous], in
 * order, for a reader (a webhook, a live stream) to compare with updatesWithPrevious of its events.
 */
export async function changeWithPrevious(
  service: TestService,
  user: Caller,
): Promise<{ events: number; updates: [string, Record<string, unknown>][] }> {
  const parent = await createTask(service, user, { title: 'before', priority: 'low', description: 'kept' });
  const patch = (id: string, body: object) =>
    service.http.patch(`/tasks/${id}`).set('Authorization', user.auth).send(body).expect(200);
  await patch(parent.id, { title: 'after', priority: 'high', description: 'kept' });
  const child = await createTask(service, user, { parentId: parent.id });
  await patch(child.id, { status: 'done' });
  return {
    // The parent's task.created and task.updated; the child's task.created with the parent's
    // task.updated; the child's task.updated with the parent's.
    events: 6,
    updates: [
      [parent.id, { title: 'before', priority: 'low' }],
      [parent.id, { subtaskCount: 0 }],
      [child.id, { status: 'todo', completedAt: null }],
      [parent.id, { subtasksDone: 0 }],
    ],
  };
}

/** The `task.updated` events among `events` as [task id, previous], in order. */
export const updatesWithPrevious = (events: Event[]): [string, unknown][] =>
  ofType(events, 'task.updated').map((event) => [event.data.task.id, event.data.previous]);
