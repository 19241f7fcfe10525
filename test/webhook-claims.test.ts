// Fair delivery decided where it is decided: which due attempts a claim takes (server/webhooks/claims.ts).
// No delivery worker runs here: the test sets the attempts in flight itself and asks for one slot.
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { CreatedWebhookSchema } from '../contract/webhooks.js';
import { tables } from '../server/db/query.js';
import { claimFairly } from '../server/webhooks/claims.js';
import { serviceForFile } from './support/app.js';
import { createTask } from './support/tasks.js';
import { registerUser, type TestUser } from './support/users.js';

const service = serviceForFile({
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  WEBHOOK_MAX_IN_FLIGHT: '16',
  USER_MAX_WEBHOOKS: '100',
});

/** A user with `hooks` webhooks on as many hosts (nothing listens: no attempt is made here) and one task's deliveries to each. */
async function withDueDeliveries(hooks: number, firstHost: number): Promise<TestUser> {
  const user = await registerUser(service);
  for (let i = 0; i < hooks; i++) {
    const res = await service.http
      .post('/webhooks')
      .set('Authorization', user.auth)
      .send({ url: `http://127.0.1.${firstHost + i}:9/hook`, events: ['task.created'] })
      .expect(201);
    CreatedWebhookSchema.parse(res.body);
  }
  await createTask(service, user, { title: 'flood' });
  return user;
}

/** Marks `n` of the user's due deliveries as in flight (leased for a minute), as a claim would. */
async function inFlight(user: TestUser, n: number): Promise<void> {
  await service.ctx.db.sql.rows(
    `UPDATE webhook_deliveries SET state = 'delivering', lease_id = $3::uuid, lease_until = now() + interval '1 minute'
     WHERE id IN (SELECT d.id FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
                  WHERE w.owner_id = $1 AND d.state = 'pending' ORDER BY d.id LIMIT $2)`,
    [user.user.id, n, randomUUID()],
  );
}

const ownerOf = async (deliveryId: string) =>
  (
    await service.ctx.db.sql.first(
      tables
        .selectFrom('webhook_deliveries')
        .innerJoin('webhooks', 'webhooks.id', 'webhook_deliveries.webhook_id')
        .select('webhooks.owner_id')
        .where('webhook_deliveries.id', '=', deliveryId),
    )
  )?.owner_id;

it('gives a freed slot to the user with the fewest attempts in flight, not to the oldest due attempt', async () => {
  // Two floods hold 15 of 16 slots (one just ended), with older due attempts on hosts that have room;
  // then another user's first event comes due.
  const first = await withDueDeliveries(20, 0);
  const second = await withDueDeliveries(20, 100);
  await inFlight(first, 7);
  await inFlight(second, 8);
  const alice = await withDueDeliveries(1, 200);
  const { claimed } = await claimFairly(service.ctx, randomUUID(), 1);
  expect(claimed).toHaveLength(1);
  expect(await ownerOf(claimed[0]!.id)).toBe(alice.user.id);
});
