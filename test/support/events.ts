import { ChangesPageSchema, type Event, type EventType } from '../../contract/events.js';
import type { TestService } from './app.js';

type Caller = { auth: string };

/** Follows GET /changes from `cursor` until an empty page; returns every event and the last cursor. */
export async function readAllChanges(service: TestService, user: Caller, cursor?: string, limit = 100): Promise<{ events: Event[]; cursor: string }> {
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
