// The client's helpers for events (issues 11 and 12): the live stream as a reconnecting iterator of
// typed events, and the check of a webhook delivery's Standard Webhooks signature.
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createClient,
  ok,
  ProblemError,
  serverSentEvents,
  subscribeToEvents,
  UnexpectedAnswerError,
  verifyWebhook,
  WebhookVerificationError,
  type Event,
  type ServerSentEvent,
} from '../contract/index.js';
import { eventMetrics } from '../server/events/metrics.js';
import { startDeliveryWorker } from '../server/webhooks/worker.js';
import { serviceForFile } from './support/app.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { expiredAccessToken } from './support/tokens.js';
import { uniqueEmail } from './support/users.js';

const served = serviceForFile(
  { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', EVENT_STREAM_HEARTBEAT_SECONDS: '1' },
  { listen: true },
);

async function signedUp(options: { fetch?: typeof fetch } = {}) {
  const client = createClient({ baseUrl: served.baseUrl, ...options });
  const account = (
    await ok(
      client.auth.register({
        body: { email: uniqueEmail('events'), password: 'correct horse battery', name: 'Events' },
      }),
    )
  ).body;
  return { client, account };
}

/** The first `count` events of an iterator, or what came before `ms` passed. */
async function take(events: AsyncIterator<Event>, count: number, ms = 10_000): Promise<Event[]> {
  const taken: Event[] = [];
  const deadline = Date.now() + ms;
  while (taken.length < count && Date.now() < deadline) {
    const next = await Promise.race([
      events.next(),
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), deadline - Date.now())),
    ]);
    if (!next || next.done) break;
    taken.push(next.value);
  }
  return taken;
}

const openStreams = async () => (await eventMetrics(served.ctx).openStreams.get()).values[0]?.value ?? 0;
const taskIdOf = (event: Event) => ('task' in event.data ? event.data.task.id : undefined);

describe('serverSentEvents: the stream format', () => {
  const streamOf = (chunks: string[]) =>
    new ReadableStream<Uint8Array>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(new TextEncoder().encode(chunk));
        controller.close();
      },
    });
  const parse = async (chunks: string[]) => {
    const events: ServerSentEvent[] = [];
    for await (const event of serverSentEvents(streamOf(chunks))) events.push(event);
    return events;
  };

  it('reads fields, comments, multi-line data and every line ending, whatever the chunking', async () => {
    const text =
      '\ufeff: connected\r\n\r\nid: 1\r\nevent: a\r\ndata: {"x":\r\ndata:1}\r\n\r\n: heartbeat\n\nid:2\revent:b\rdata: two\r\rdata\n\n';
    const expected = [
      { id: '1', event: 'a', data: '{"x":\n1}' },
      { id: '2', event: 'b', data: 'two' },
      { id: '2', event: 'message', data: '' },
    ];
    expect(await parse([text])).toEqual(expected);
    // Every split point, including between the CR and LF of a CRLF.
    for (let at = 1; at < text.length; at++) expect(await parse([text.slice(0, at), text.slice(at)])).toEqual(expected);
    expect(await parse([...text])).toEqual(expected);
  });

  it('dispatches an event ended by CRs at once, on a stream that stays open', async () => {
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('id: 1\rdata: {}\r\r'));
      },
    });
    const events = serverSentEvents(body);
    const first = await Promise.race([
      events.next(),
      new Promise((resolve) => setTimeout(() => resolve('held back'), 1_000)),
    ]);
    expect(first).toEqual({ done: false, value: { id: '1', event: 'message', data: '{}' } });
    await events.return(undefined);
  });

  it('never dispatches an event whose blank line did not arrive', async () => {
    expect(await parse(['id: 1\ndata: whole\n\nid: 2\ndata: cut off'])).toEqual([
      { id: '1', event: 'message', data: 'whole' },
    ]);
  });
});

describe('subscribeToEvents against a misbehaving server (found in review)', () => {
  const problem = (status: number, code: string) =>
    new Response(
      JSON.stringify({
        type: `/problems/${code}`,
        title: code,
        status,
        code,
        detail: code,
        instance: '/events',
        requestId: 'r',
      }),
      {
        status,
        headers: { 'content-type': 'application/problem+json' },
      },
    );
  const sessionWith = (answer: () => Response) => {
    let connections = 0;
    let renewals = 0;
    return {
      counts: () => ({ connections, renewals }),
      session: {
        url: 'http://service.test/events',
        fetch: async () => {
          connections++;
          return answer();
        },
        accessToken: async () => 'token',
        renewedAccessToken: async () => {
          renewals++;
          return 'renewed';
        },
      },
    };
  };
  const firstOutcome = (events: AsyncIterable<Event>) =>
    take(events[Symbol.asyncIterator](), 1, 3_000).catch((error: unknown) => error);

  it('renews a refused token once, then gives up instead of reconnecting in a loop', async () => {
    const server = sessionWith(() => problem(401, 'unauthenticated'));
    const outcome = await firstOutcome(subscribeToEvents(server.session));
    expect(outcome).toBeInstanceOf(ProblemError);
    expect(server.counts()).toEqual({ connections: 2, renewals: 1 });
  });

  it('does not renew on a 401 that is not about its token (a proxy asking for its own credentials)', async () => {
    const server = sessionWith(() => new Response('proxy login', { status: 401 }));
    expect(await firstOutcome(subscribeToEvents(server.session))).toBeInstanceOf(UnexpectedAnswerError);
    expect(server.counts()).toEqual({ connections: 1, renewals: 0 });
  });

  it('backs off on 503 even with Retry-After: 0', async () => {
    const server = sessionWith(() => new Response(null, { status: 503, headers: { 'retry-after': '0' } }));
    const stop = new AbortController();
    const outcome = firstOutcome(subscribeToEvents(server.session, { signal: stop.signal }));
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    stop.abort();
    await outcome;
    expect(server.counts().connections).toBeLessThanOrEqual(4);
  });

  it('fails at once on a 200 that is not an event stream (a captive portal)', async () => {
    const server = sessionWith(
      () => new Response('<html>log in to the Wi-Fi</html>', { status: 200, headers: { 'content-type': 'text/html' } }),
    );
    expect(await firstOutcome(subscribeToEvents(server.session))).toBeInstanceOf(UnexpectedAnswerError);
    expect(server.counts().connections).toBe(1);
  });
});

describe('client.events.subscribe', () => {
  it("yields the caller's events as typed objects as they commit, and closes its connection when the loop ends", async () => {
    const { client } = await signedUp();
    let opened = 0;
    const events = client.events.subscribe({ onOpen: () => opened++ })[Symbol.asyncIterator]();
    const first = take(events, 2);
    await expect.poll(() => opened).toBe(1);
    const task = (await ok(client.tasks.create({ body: { title: 'streamed' } }))).body;
    await ok(client.tasks.update({ params: { task_id: task.id }, body: { status: 'done' } }));
    const received = await first;
    expect(received.map((event) => event.type)).toEqual(['task.created', 'task.updated']);
    expect(received.map(taskIdOf)).toEqual([task.id, task.id]);
    expect(await openStreams()).toBe(1);
    await events.return?.(undefined);
    await expect.poll(openStreams).toBe(0);
  });

  it('reconnects after the connection breaks and resumes after the last event it yielded: nothing missed, nothing twice', async () => {
    // The first connection breaks right after its first event.
    let connections = 0;
    const breaking: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (new URL(String(input)).pathname !== '/events' || ++connections > 1 || !response.body) return response;
      const reader = response.body.getReader();
      let seen = '';
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const { value, done } = await reader.read();
          if (done) return controller.close();
          seen += new TextDecoder().decode(value);
          controller.enqueue(value);
          if (/\nid: /.test(`\n${seen}`)) controller.error(new TypeError('network connection lost'));
        },
      });
      return new Response(body, { status: response.status, headers: response.headers });
    };
    const { client } = await signedUp({ fetch: breaking });
    let opened = 0;
    const events = client.events.subscribe({ onOpen: () => opened++ })[Symbol.asyncIterator]();
    const all = take(events, 5, 20_000);
    await expect.poll(() => opened).toBe(1);
    const tasks = [];
    for (let i = 0; i < 5; i++) tasks.push((await ok(client.tasks.create({ body: { title: `task ${i}` } }))).body);
    const received = await all;
    expect(received.map(taskIdOf)).toEqual(tasks.map((task) => task.id));
    expect(connections).toBe(2);
    await events.return?.(undefined);
  });

  it('renews an expired access token and goes on', async () => {
    const { client, account } = await signedUp();
    client.useTokens({
      accessToken: await expiredAccessToken(served, account.accessToken),
      refreshToken: account.refreshToken,
    });
    let opened = 0;
    const events = client.events.subscribe({ onOpen: () => opened++ })[Symbol.asyncIterator]();
    const first = take(events, 1);
    await expect.poll(() => opened).toBe(1);
    const task = (await ok(client.tasks.create({ body: { title: 'after renewal' } }))).body;
    expect((await first).map(taskIdOf)).toEqual([task.id]);
    expect(client.tokens()?.refreshToken).not.toBe(account.refreshToken);
    await events.return?.(undefined);
  });

  it('throws cursor_expired when the event to resume after is no longer retained', async () => {
    const { client } = await signedUp();
    const events = client.events.subscribe({ lastEventId: '00000000-0000-7000-8000-000000000000' });
    const error: unknown = await take(events[Symbol.asyncIterator](), 1).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(ProblemError);
    expect(error instanceof ProblemError && error.problem.code).toBe('cursor_expired');
  });

  it('throws unauthenticated once the session is over, instead of reconnecting for ever', async () => {
    const { client } = await signedUp();
    const other = createClient({ baseUrl: served.baseUrl, tokens: client.tokens() });
    let opened = 0;
    const events = client.events.subscribe({ onOpen: () => opened++ })[Symbol.asyncIterator]();
    const outcome = take(events, 1, 20_000).catch((thrown: unknown) => thrown);
    await expect.poll(() => opened).toBe(1);
    await ok(other.auth.logout());
    const error = await outcome;
    expect(error).toBeInstanceOf(ProblemError);
    expect(error instanceof ProblemError && error.status).toBe(401);
  });

  it('keeps a quiet stream open on its heartbeats (one a second here) past the idle timeout', async () => {
    const { client } = await signedUp();
    let opened = 0;
    const stop = new AbortController();
    const events = client.events
      .subscribe({ signal: stop.signal, idleTimeoutMs: 2_500, onOpen: () => opened++ })
      [Symbol.asyncIterator]();
    const nothing = take(events, 1, 7_000);
    expect(await nothing).toEqual([]);
    expect(opened).toBe(1);
    stop.abort();
  });

  it('ends quietly when its signal aborts', async () => {
    const { client } = await signedUp();
    const stop = new AbortController();
    let opened = 0;
    const done = (async () => {
      const seen: Event[] = [];
      for await (const event of client.events.subscribe({ signal: stop.signal, onOpen: () => opened++ }))
        seen.push(event);
      return seen;
    })();
    await expect.poll(() => opened).toBe(1);
    stop.abort();
    expect(await done).toEqual([]);
  });
});

describe('verifyWebhook', () => {
  const secret = `whsec_${Buffer.from('a secret of thirty-two bytes !!!').toString('base64')}`;
  const event: Event = {
    id: '0193a4b2-7c3d-7e5f-8a9b-0c1d2e3f4a5b',
    type: 'tag.deleted',
    occurredAt: '2026-11-23T12:00:00.000Z',
    actorId: null,
    data: { tagId: '0193a4b2-7c3d-7e5f-8a9b-0c1d2e3f4a5c' },
  };
  const body = JSON.stringify(event);
  const now = new Date('2026-11-23T12:00:10Z');
  const signedHeaders = (options: { secret?: string; at?: Date; id?: string; payload?: string } = {}) => {
    const at = options.at ?? now;
    const id = options.id ?? event.id;
    const signature = new Webhook(options.secret ?? secret).sign(id, at, options.payload ?? body);
    return {
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': signature,
    };
  };
  const refusal = (promise: Promise<unknown>) =>
    promise.then(
      () => 'accepted',
      (error: unknown) => (error instanceof WebhookVerificationError ? error.message : String(error)),
    );

  it('accepts what the standardwebhooks library signs, from Node headers or fetch Headers, as text or bytes', async () => {
    expect(await verifyWebhook(secret, { headers: signedHeaders(), body }, { now })).toEqual(event);
    expect(
      await verifyWebhook(
        secret,
        { headers: new Headers(signedHeaders()), body: new TextEncoder().encode(body) },
        { now },
      ),
    ).toEqual(event);
  });

  it('finds the headers in any letter case, and in a Headers of another realm', async () => {
    const capitalised = Object.fromEntries(
      Object.entries(signedHeaders()).map(([name, value]) => [name.replace(/(^|-)w/g, (m) => m.toUpperCase()), value]),
    );
    expect(await verifyWebhook(secret, { headers: capitalised, body }, { now })).toEqual(event);
    const plain = new Headers(signedHeaders());
    const foreign = { get: (name: string) => plain.get(name) };
    expect(await verifyWebhook(secret, { headers: foreign, body }, { now })).toEqual(event);
  });

  it('refuses rather than skips the age check when the clock or tolerance is not a number', async () => {
    const old = signedHeaders({ at: new Date(now.getTime() - 365 * 24 * 3600 * 1000) });
    expect(await refusal(verifyWebhook(secret, { headers: old, body }, { now: new Date('not a date') }))).toMatch(
      /too old/,
    );
    expect(await refusal(verifyWebhook(secret, { headers: old, body }, { now, toleranceSeconds: Number.NaN }))).toMatch(
      /too old/,
    );
  });

  it('accepts any one valid signature of several (a secret being rotated)', async () => {
    const headers = signedHeaders();
    const other = signedHeaders({
      secret: `whsec_${Buffer.from('another secret of 32 bytes !!!!!').toString('base64')}`,
    });
    expect(
      await verifyWebhook(
        secret,
        {
          headers: { ...headers, 'webhook-signature': `${other['webhook-signature']} ${headers['webhook-signature']}` },
          body,
        },
        { now },
      ),
    ).toEqual(event);
  });

  it.each([
    [
      'an altered body',
      () => ({ headers: signedHeaders(), body: body.replace('tag.deleted', 'tag.created') }),
      /No signature matches/,
    ],
    [
      'another secret',
      () => ({ headers: signedHeaders({ secret: `whsec_${Buffer.from('x'.repeat(32)).toString('base64')}` }), body }),
      /No signature matches/,
    ],
    [
      'a replay 10 minutes late',
      () => ({ headers: signedHeaders({ at: new Date(now.getTime() - 600_000) }), body }),
      /too old/,
    ],
    [
      'a timestamp from the future',
      () => ({ headers: signedHeaders({ at: new Date(now.getTime() + 600_000) }), body }),
      /future/,
    ],
    [
      'no signature',
      () => ({ headers: { ...signedHeaders(), 'webhook-signature': undefined }, body }),
      /webhook-signature header is missing/,
    ],
    [
      'a v2 signature',
      () => ({
        headers: {
          ...signedHeaders(),
          'webhook-signature': signedHeaders()['webhook-signature'].replace('v1,', 'v2,'),
        },
        body,
      }),
      /No signature/,
    ],
    [
      'a signature that is not base64',
      () => ({ headers: { ...signedHeaders(), 'webhook-signature': 'v1,%%%' }, body }),
      /No signature/,
    ],
    [
      'a signed body that is not an event',
      () => ({ headers: signedHeaders({ payload: '{"id":1}' }), body: '{"id":1}' }),
      /not an event/,
    ],
    [
      'an id header that is not the event id',
      () => ({ headers: signedHeaders({ id: 'msg_other' }), body }),
      /not the event id/,
    ],
  ])('refuses %s', async (_what, delivery, reason) => {
    expect(await refusal(verifyWebhook(secret, delivery(), { now }))).toMatch(reason);
  });

  describe('on a real delivery', () => {
    let receiver: Receiver;
    let stopWorker: () => Promise<void>;
    beforeAll(async () => {
      receiver = await startReceiver();
      stopWorker = startDeliveryWorker(served.ctx);
    });
    afterAll(async () => {
      await stopWorker();
      await receiver.close();
    });

    it('verifies what the service sent, and nothing else', async () => {
      const { client } = await signedUp();
      const webhook = (
        await ok(client.webhooks.create({ body: { url: receiver.url('/client-verify'), events: ['task.created'] } }))
      ).body;
      const task = (await ok(client.tasks.create({ body: { title: 'delivered' } }))).body;
      await expect.poll(() => receiver.received('/client-verify').length, { timeout: 10_000 }).toBe(1);
      const [delivery] = receiver.received('/client-verify');
      if (!delivery) throw new Error('no delivery');
      const verified = await verifyWebhook(webhook.secret, { headers: delivery.headers, body: delivery.body });
      expect(verified.type).toBe('task.created');
      expect(taskIdOf(verified)).toBe(task.id);
      expect(
        await refusal(
          verifyWebhook(webhook.secret, {
            headers: delivery.headers,
            body: delivery.body.replace('delivered', 'forged'),
          }),
        ),
      ).toMatch(/No signature matches/);
    });
  });
});
