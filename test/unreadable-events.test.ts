// An event in the log that does not read as the contract says (a writer that drifted from it, a row
// edited by hand) is skipped by every reader, logged and counted: the changes feed still answers its
// pages, live streams go on to the next event, and its webhook delivery fails once instead of being
// retried for ever.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { pageOf } from '../contract/common.js';
import { TagSchema } from '../contract/tags.js';
import { CreatedWebhookSchema, DeliverySchema } from '../contract/webhooks.js';
import { tables } from '../server/db/query.js';
import { recordEvent } from '../server/events/outbox.js';
import { startDeliveryWorker } from '../server/webhooks/worker.js';
import { serviceForFile } from './support/app.js';
import { readAllChanges } from './support/events.js';
import { samplesOf, valueOf } from './support/metrics.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { openSse } from './support/sse.js';
import { registerAdmin, registerUser, type TestUser } from './support/users.js';

const served = serviceForFile(
  { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_RETRY_SCHEDULE: '0.2,0.2,0.2' },
  { listen: true },
);
let receiver: Receiver;
let stopWorker: () => Promise<void>;
let alice: TestUser;
let admin: TestUser;

beforeAll(async () => {
  receiver = await startReceiver();
  stopWorker = startDeliveryWorker(served.ctx);
  [alice, admin] = await Promise.all([registerUser(served), registerAdmin(served)]);
});
afterAll(async () => {
  await stopWorker();
  await receiver.close();
});

const unreadable = async (reader: string): Promise<number> => {
  const res = await served.http.get('/metrics').set('Authorization', admin.auth).expect(200);
  return valueOf(samplesOf(res.text), 'events_unreadable_total', { reader });
};

/**
 * Writes a `tag.deleted` of alice's through the outbox (with its webhook deliveries), then spoils its
 * data in the same transaction, so that no reader ever saw it readable.
 */
async function writeUnreadableEvent(): Promise<void> {
  const tagId = randomUUID();
  await served.ctx.db.sql.transaction(async (tx) => {
    await recordEvent(tx, alice.user.id, { type: 'tag.deleted', data: { tagId }, audience: [alice.user.id] });
    await tx.write(
      tables
        .updateTable('events')
        .set({ data: JSON.stringify({ tagId: 'not a uuid' }) })
        .where((eb) => eb(sql<string>`data->>'tagId'`, '=', tagId)),
    );
  });
}

describe('an event that does not read as the contract says', () => {
  it('is skipped, logged and counted by the changes feed, the live stream and webhooks, which go on', async () => {
    const path = '/unreadable';
    const hook = await served.http
      .post('/webhooks')
      .set('Authorization', alice.auth)
      .send({ url: receiver.url(path), events: ['*'] })
      .expect(201);
    const webhook = CreatedWebhookSchema.parse(hook.body);
    receiver.expect(path, webhook.secret);
    const stream = await openSse(served.baseUrl, { Authorization: alice.auth });
    const before = { log: await unreadable('log'), webhook: await unreadable('webhook') };

    await writeUnreadableEvent();
    const created = TagSchema.parse(
      (await served.http.post('/tags').set('Authorization', alice.auth).send({ name: 'after' }).expect(201)).body,
    );

    // The live stream delivers the next event.
    await stream.until(() => stream.events().some((event) => event.type === 'tag.created'), 10_000);
    expect(stream.events().map((event) => event.type)).toEqual(['tag.created']);
    stream.close();

    // The changes feed answers every page (one event a page here), without the unreadable one.
    const { events } = await readAllChanges(served, alice, undefined, 1);
    expect(events.map((event) => event.type)).toEqual(['tag.created']);
    expect(events[0]?.data).toEqual({ tag: created });

    // The webhook gets the next event; the unreadable one's attempt failed once and is not retried.
    await vi.waitFor(() => expect(receiver.received(path).map((r) => r.event.type)).toEqual(['tag.created']), {
      timeout: 10_000,
    });
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // past the retry schedule (0.2 s)
    const deliveries = pageOf(DeliverySchema).parse(
      (
        await served.http
          .get(`/webhooks/${webhook.id}/deliveries`)
          .query({ limit: 100 })
          .set('Authorization', alice.auth)
          .expect(200)
      ).body,
    ).items;
    const spoiled = deliveries.filter((delivery) => delivery.eventType === 'tag.deleted');
    expect(spoiled).toHaveLength(1);
    expect(spoiled[0]).toMatchObject({ state: 'failed', error: 'the event does not read as the contract says' });

    expect(await unreadable('log')).toBeGreaterThan(before.log);
    expect(await unreadable('webhook')).toBe(before.webhook + 1);
  });
});
