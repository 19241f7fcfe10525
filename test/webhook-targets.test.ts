// Webhook SSRF: a target is allowed only when every address it has is global
// unicast and not the service's own, in any spelling, checked when it is registered and again
// before each delivery connects. Every name resolves through a stub and every connection goes
// through a stub connector that only ever reaches the loopback receiver: nothing here leaves
// this machine, and each refusal is proven to happen before any connection is opened.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pageOf } from '../contract/common.js';
import { CreatedWebhookSchema, DeliverySchema, type Delivery } from '../contract/webhooks.js';
import { tables } from '../server/db/query.js';
import { useWebhookNetwork } from '../server/webhooks/network.js';
import { startDeliveryWorker } from '../server/webhooks/worker.js';
import { serviceForFile } from './support/app.js';
import { errorPaths, expectProblem } from './support/problems.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { userForFile } from './support/users.js';
import { stubNetwork, type StubNetwork } from './support/webhook-network.js';

/** A global unicast address the stub connector pretends to reach (it connects to the loopback receiver). */
const PUBLIC = '93.184.215.14';
/** An address the stub says the service listens on: global unicast, but the service itself. */
const OWN = '8.8.4.4';

// Every spelling and range the registries refuse, and the ones finding 1 named.
const REFUSED_LITERALS = [
  // loopback, in the spellings the URL parser reads
  '127.0.0.1',
  '127.1',
  '0x7f.0.0.1',
  '0x7f000001',
  '2130706433',
  '0177.0.0.1',
  '017700000001',
  '[::1]',
  '[::ffff:127.0.0.1]',
  '[::ffff:7f00:1]',
  '[0:0:0:0:0:ffff:7f00:1]',
  // IPv4-compatible, NAT64, 6to4 and Teredo carrying a refused IPv4
  '[::127.0.0.1]',
  '[::7f00:1]',
  '[::10.0.0.1]',
  '[::8.8.8.8]',
  '[64:ff9b::127.0.0.1]',
  '[64:ff9b::a9fe:a9fe]',
  '[64:ff9b:1::808:808]',
  '[2002:7f00:1::1]',
  '[2002:c0a8:101::]',
  '[2001:0:7f00:1::1]',
  '[2001:0:808:808:0:0:80ff:fffe]',
  '[2001:0:808:808::f5ff:fffe]',
  // private, shared (CGNAT), link-local, unspecified, broadcast
  '10.0.0.8',
  '172.16.5.4',
  '192.168.1.1',
  '100.64.0.1',
  '100.127.255.254',
  '169.254.169.254',
  '0.0.0.0',
  '0',
  '255.255.255.255',
  // documentation, benchmarking, 192.0.0.0/24, 6to4 relay, reserved, multicast
  '192.0.2.1',
  '198.51.100.7',
  '203.0.113.9',
  '198.18.0.1',
  '198.19.255.255',
  '192.0.0.9',
  '192.0.0.170',
  '192.88.99.1',
  '240.0.0.1',
  '250.1.2.3',
  '224.0.0.251',
  '239.255.255.250',
  // IPv6: unspecified, link-local, unique local, site-local, multicast, documentation, discard, benchmarking, ORCHID, segment routing, outside 2000::/3
  '[::]',
  '[fe80::1]',
  '[fd00::1]',
  '[fc00::1]',
  '[fec0::1]',
  '[ff02::1]',
  '[ff0e::1]',
  '[2001:db8::1]',
  '[3fff::1]',
  '[100::1]',
  '[100:0:0:1::1]',
  '[2001:2::1]',
  '[2001:10::1]',
  '[5f00::1]',
  '[4000::1]',
  '[::ffff:0:7f00:1]',
  // the service's own address
  OWN,
  `[::ffff:${OWN}]`,
];
// Addresses a name may resolve to that are refused, whatever the name.
const REFUSED_ANSWERS = [
  '127.0.0.1',
  '::1',
  '10.1.2.3',
  '192.0.2.55',
  '198.51.100.1',
  '203.0.113.200',
  '2001:db8::5',
  '::ffff:169.254.169.254',
  '64:ff9b::a00:1',
  '2002:a00:1::',
  '100::9',
  '198.18.3.4',
  '100.100.0.1',
  '224.1.1.1',
  '240.9.9.9',
  OWN,
];

const DeliveryPageSchema = pageOf(DeliverySchema);

const service = serviceForFile({ WEBHOOK_RETRY_SCHEDULE: '0.2', WEBHOOK_TIMEOUT_MS: '3000' });
let receiver: Receiver;
let network: StubNetwork;
let stopWorker: () => Promise<void>;
let port = 0;
let names = 0;
const carol = userForFile(service);
beforeAll(async () => {
  receiver = await startReceiver();
  port = Number(new URL(receiver.url('/')).port);
  network = stubNetwork(() => port, [OWN]);
  useWebhookNetwork(service.ctx, network);
  stopWorker = startDeliveryWorker(service.ctx);
});
afterAll(async () => {
  await stopWorker();
  await receiver.close();
});

const register = (url: string, events = ['*']) =>
  service.http.post('/webhooks').set('Authorization', carol.auth).send({ url, events });
const connectionsTo = (hostname: string) => network.connections.filter((c) => c.hostname === hostname);
const freshName = () => `host-${++names}.example`;
async function log(webhookId: string): Promise<Delivery[]> {
  const res = await service.http.get(`/webhooks/${webhookId}/deliveries`).set('Authorization', carol.auth).expect(200);
  return DeliveryPageSchema.parse(res.body).items;
}

describe('registering a target', () => {
  it('refuses every special-purpose address in every spelling with 400 on body.url, without a lookup or a connection', async () => {
    for (const host of REFUSED_LITERALS) {
      const res = await register(`http://${host}:8080/hook`);
      expect(errorPaths(expectProblem(res, 400, 'validation_failed')), host).toEqual(['body.url']);
    }
    expect(network.lookups).toEqual([]);
    expect(network.connections).toEqual([]);
  });

  it('refuses a name any of whose addresses is refused, and never says what it resolved to', async () => {
    for (const address of REFUSED_ANSWERS) {
      for (const answer of [[address], [PUBLIC, address]]) {
        const name = freshName();
        network.answer(name, answer);
        const res = await register(`https://${name}/hook`);
        const problem = expectProblem(res, 400, 'validation_failed');
        expect(errorPaths(problem), address).toEqual(['body.url']);
        expect(res.text, address).not.toContain(address);
        expect(res.text).not.toMatch(/93\.184|resolves to \d/);
        expect(network.lookups).toContain(name);
      }
    }
    expect(network.connections).toEqual([]);
  });

  it('checks a changed url the same way', async () => {
    const name = freshName();
    network.answer(name, [PUBLIC]);
    const created = CreatedWebhookSchema.parse(
      (await register(`http://${name}/hook`, ['tag.created']).expect(201)).body,
    );
    for (const url of ['http://192.0.2.1/', 'http://[2001:db8::1]/', 'http://0x7f.1/']) {
      expectProblem(
        await service.http.patch(`/webhooks/${created.id}`).set('Authorization', carol.auth).send({ url }),
        400,
        'validation_failed',
      );
    }
    await service.http.delete(`/webhooks/${created.id}`).set('Authorization', carol.auth).expect(204);
  });
});

describe('delivering', () => {
  it('connects to the very address it checked, and delivers through it', async () => {
    const name = freshName();
    network.answer(name, [PUBLIC]);
    const created = CreatedWebhookSchema.parse(
      (await register(`http://${name}/public`, ['tag.created']).expect(201)).body,
    );
    receiver.expect('/public', created.secret);
    await service.http.post('/tags').set('Authorization', carol.auth).send({ name: 'public' }).expect(201);
    await expect.poll(() => receiver.received('/public').length).toBe(1);
    expect(receiver.received('/public')[0]?.verified).toBe(true);
    expect(connectionsTo(name)).toEqual([{ hostname: name, address: PUBLIC, port: 80 }]);
    await expect.poll(async () => (await log(created.id)).map((d) => [d.attempt, d.state])).toEqual([[1, 'succeeded']]);
    await service.http.delete(`/webhooks/${created.id}`).set('Authorization', carol.auth).expect(204);
  });

  it('checks again before connecting: a name rebound to a refused address is a failed attempt, and no connection is made', async () => {
    for (const address of ['127.0.0.1', '198.51.100.1', '2001:db8::5', '::ffff:10.0.0.1', OWN]) {
      const name = freshName();
      network.answer(name, [PUBLIC]);
      const created = CreatedWebhookSchema.parse(
        (await register(`http://${name}/rebound`, ['tag.created']).expect(201)).body,
      );
      network.answer(name, [PUBLIC, address]); // DNS rebinding: the name now also points inside
      await service.http
        .post('/tags')
        .set('Authorization', carol.auth)
        .send({ name: `rebound ${names}` })
        .expect(201);
      await expect
        .poll(async () => (await log(created.id)).map((d) => [d.attempt, d.state]), { timeout: 10_000 })
        .toEqual([
          [2, 'failed'],
          [1, 'failed'],
        ]);
      const [last] = await log(created.id);
      expect(last?.error).toMatch(/may not reach/);
      expect(last?.error).not.toContain(address);
      expect(last?.statusCode).toBeNull();
      expect(connectionsTo(name), address).toEqual([]);
      await service.http.delete(`/webhooks/${created.id}`).set('Authorization', carol.auth).expect(204);
    }
    expect(receiver.received('/rebound')).toEqual([]);
  });

  it('accepts a name under .invalid (RFC 6761) and fails each of its attempts at once, without a lookup or a connection', async () => {
    // task-service-verify registers such a webhook: every attempt is logged, none reaches anyone.
    for (const host of ['verify.invalid', 'a.b.invalid.', 'invalid']) {
      network.answer(host, [PUBLIC]); // the stub would answer: the service must not ask it
      const created = CreatedWebhookSchema.parse(
        (await register(`https://${host}/never`, ['tag.created']).expect(201)).body,
      );
      await service.http
        .post('/tags')
        .set('Authorization', carol.auth)
        .send({ name: `never ${host}` })
        .expect(201);
      await expect
        .poll(async () => (await log(created.id)).map((d) => [d.attempt, d.state]), { timeout: 10_000 })
        .toEqual([
          [2, 'failed'],
          [1, 'failed'],
        ]);
      expect((await log(created.id)).map((d) => d.error)).toEqual([
        expect.stringMatching(/did not resolve \(ENOTFOUND\)/),
        expect.stringMatching(/did not resolve/),
      ]);
      expect(network.lookups, host).not.toContain(host);
      expect(connectionsTo(host), host).toEqual([]);
      await service.http.delete(`/webhooks/${created.id}`).set('Authorization', carol.auth).expect(204);
    }
  });

  it('refuses an address literal stored before the rules were this strict, without connecting', async () => {
    const name = freshName();
    network.answer(name, [PUBLIC]);
    const created = CreatedWebhookSchema.parse(
      (await register(`http://${name}/old`, ['tag.created']).expect(201)).body,
    );
    for (const url of ['http://203.0.113.9/old', 'http://[64:ff9b::7f00:1]/old']) {
      await service.ctx.db.sql.write(
        tables.updateTable('webhooks').set({ url, failing_since: null }).where('id', '=', created.id),
      );
      const before = network.connections.length;
      await service.http
        .post('/tags')
        .set('Authorization', carol.auth)
        .send({ name: `old ${url}` })
        .expect(201);
      await expect
        .poll(async () => (await log(created.id)).filter((d) => d.state === 'failed').length, { timeout: 10_000 })
        .toBeGreaterThanOrEqual(url.includes('203') ? 2 : 4);
      expect(network.connections.length).toBe(before);
    }
    expect(receiver.received('/old')).toEqual([]);
  });
});
