// Writes under kill -9. Writers on 16 connections (creates under Idempotency-Key,
// patches and deletes under If-Match, tag links) while the service's process group is killed twice:
// once by itself at the moment an answer is about to be kept (TEST_CRASH_AT_KEPT_ANSWER, the one
// window a kill from outside hits only by luck), once by the test mid-run. Each time it starts
// again on the same data directory or database, and every unanswered request is retried (creates
// with their key). Then the events say exactly what was acknowledged, and the webhook got them all.
import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AuthResultSchema } from '../contract/auth.js';
import { ChangesPageSchema, type Event } from '../contract/events.js';
import { TagSchema } from '../contract/tags.js';
import { TaskSchema } from '../contract/tasks.js';
import { CreatedWebhookSchema } from '../contract/webhooks.js';
import { freshDatabase, readyDataDir, serverReachableTempDir, type TestDatabase } from './support/databases.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { killGroup, startServiceProcess, type ServiceProcess } from './support/processes.js';

const WRITERS = 16;
const TAGS = 4;
/** The service dies as the (per process) Nth answer under a key is about to be kept: creates only, in the first run. */
const CRASH_AT = 30;

type Kind = 'create' | 'patch' | 'link' | 'delete';
interface Write {
  kind: Kind;
  method: 'POST' | 'PATCH' | 'DELETE';
  path: string;
  headers: Record<string, string>;
  body?: string;
  taskId?: string;
  /** A create's title, a patch's description, a link's tag id: what its event shows. */
  mark: string;
  /** The final answer's status; undefined while unanswered (the process died under it, or a 5xx). */
  status?: number;
  answer?: unknown;
}

let database: TestDatabase | undefined;
let dataDir: string;
let receiver: Receiver;
const started: ServiceProcess[] = [];

beforeEach(async () => {
  if (process.env.TEST_DB === 'postgres') database = await freshDatabase();
  // On the embedded default, a copy of the run's ready data directory: kills, not a first start, are the subject.
  dataDir = database
    ? await serverReachableTempDir('task-service-write-faults-')
    : await readyDataDir('task-service-write-faults-');
  receiver = await startReceiver();
});
afterEach(async () => {
  started.splice(0).forEach(killGroup);
  await receiver.close();
  await database?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

/** The embedded default in DATA_DIR, or the external server's fresh database; two HTTP workers either way. */
async function start(env: Record<string, string> = {}): Promise<ServiceProcess> {
  const service = await startServiceProcess(
    {
      DATA_DIR: dataDir,
      DATABASE_URL: database?.url ?? '',
      WEB_CONCURRENCY: '2',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_RETRY_SCHEDULE: '1',
      WEBHOOK_TIMEOUT_MS: '2000',
      // A lease cut by a kill runs out 2 s + 3 s after its attempt started (60 s past the timeout by default).
      WEBHOOK_LEASE_GRACE_SECONDS: '3',
      // A key a killed request held is free again 10 s after its claim (60 s by default).
      IDEMPOTENCY_ABANDONED_SECONDS: '10',
      ...env,
    },
    { ownGroup: true },
  );
  started.push(service);
  return service;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const pick = <T>(items: T[]): T | undefined => items[Math.floor(Math.random() * items.length)];

describe('writes under kill -9', () => {
  it('keeps exactly the acknowledged writes, one event each in version order, none twice for a key, all delivered', async () => {
    let service = await start({ TEST_CRASH_AT_KEPT_ANSWER: String(CRASH_AT) });
    const registered = await fetch(`${service.url}/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        email: `faults-${randomUUID()}@example.test`,
        password: 'correct horse battery',
        name: 'Faults',
      }),
    });
    const auth = `Bearer ${AuthResultSchema.parse(await registered.json()).accessToken}`;
    const json = { authorization: auth, 'content-type': 'application/json' };

    /** Sends a write once; an answer below 500 settles it. */
    const send = async (write: Write): Promise<void> => {
      const res = await fetch(`${service.url}${write.path}`, {
        method: write.method,
        headers: write.headers,
        body: write.body,
      }).catch(() => undefined);
      if (!res || res.status >= 500) return;
      write.status = res.status;
      const text = await res.text().catch(() => '');
      write.answer = text ? JSON.parse(text) : undefined;
    };

    // Setup, before any writer: a webhook for every event, and the tags to link (keyed, so they count towards CRASH_AT).
    const hook = await fetch(`${service.url}/webhooks`, {
      method: 'POST',
      headers: { ...json, 'idempotency-key': randomUUID() },
      body: JSON.stringify({ url: receiver.url('/all'), events: ['*'] }),
    });
    expect(hook.status).toBe(201);
    receiver.expect('/all', CreatedWebhookSchema.parse(await hook.json()).secret);
    const tagIds: string[] = [];
    for (let i = 0; i < TAGS; i++) {
      const res = await fetch(`${service.url}/tags`, {
        method: 'POST',
        headers: { ...json, 'idempotency-key': randomUUID() },
        body: JSON.stringify({ name: `tag ${i}` }),
      });
      tagIds.push(TagSchema.parse(await res.json()).id);
    }

    const writes: Write[] = [];
    /** Tasks a writer may change, with the version last acknowledged. */
    const live = new Map<string, number>();
    const writeOf = (kind: Kind, writer: number, n: number): Write | undefined => {
      const mark = `w${writer}-${n}`;
      if (kind === 'create') {
        return {
          kind,
          method: 'POST',
          path: '/tasks',
          headers: { ...json, 'idempotency-key': randomUUID() },
          body: JSON.stringify({ title: mark }),
          mark,
        };
      }
      const taskId = pick([...live.keys()]);
      if (!taskId) return undefined;
      const ifMatch = `"${live.get(taskId)}"`;
      if (kind === 'patch')
        return {
          kind,
          method: 'PATCH',
          path: `/tasks/${taskId}`,
          headers: { ...json, 'if-match': ifMatch },
          body: JSON.stringify({ description: mark }),
          taskId,
          mark,
        };
      if (kind === 'delete')
        return {
          kind,
          method: 'DELETE',
          path: `/tasks/${taskId}`,
          headers: { authorization: auth, 'if-match': ifMatch },
          taskId,
          mark,
        };
      const tagId = pick(tagIds) ?? '';
      return {
        kind,
        method: 'POST',
        path: `/tasks/${taskId}/tags/${tagId}`,
        headers: { authorization: auth, 'idempotency-key': randomUUID() },
        taskId,
        mark: tagId,
      };
    };
    const learn = (write: Write) => {
      if (write.kind === 'delete' && write.status === 204 && write.taskId) live.delete(write.taskId);
      const task = TaskSchema.safeParse(write.answer);
      if (task.success && (write.status === 200 || write.status === 201)) live.set(task.data.id, task.data.version);
    };
    let running = true;
    const writer = async (n: number, kinds: Kind[]) => {
      for (let i = 0; running; i++) {
        const write = writeOf(pick(kinds) ?? 'create', n, i);
        if (!write) {
          await sleep(5); // no task to change yet
          continue;
        }
        writes.push(write);
        await send(write);
        learn(write);
        if (write.status === undefined) return; // the process died under it
      }
    };

    // First run: creates (the only keyed writes), patches and deletes, until the service kills itself at an answer.
    const firstKinds: Kind[] = ['create', 'create', 'create', 'patch', 'patch', 'delete'];
    await Promise.all(Array.from({ length: WRITERS }, (_, n) => writer(n, firstKinds)));
    await service.exited;
    const firstUnanswered = writes.filter((w) => w.status === undefined).length;

    // Second run: every kind, killed from outside once it has run a while.
    service = await start();
    const before = writes.length;
    const writers = Array.from({ length: WRITERS }, (_, n) =>
      writer(n + WRITERS, ['create', 'create', 'patch', 'patch', 'link', 'link', 'delete']),
    );
    while (writes.length < before + 400) await sleep(20);
    await sleep(Math.random() * 300);
    killGroup(service);
    await Promise.all(writers);
    await service.exited;
    running = false;

    // Third run: every unanswered write again, as sent; a key still held by a request that died is free after 10 s.
    service = await start();
    const unanswered = writes.filter((w) => w.status === undefined);
    const deadline = Date.now() + 120_000;
    for (let pending = unanswered; pending.length > 0 && Date.now() < deadline;) {
      await Promise.all(pending.map(send));
      pending = pending.filter(
        (w) =>
          w.status === undefined ||
          (w.status === 409 && z.object({ code: z.literal('idempotency_key_in_use') }).safeParse(w.answer).success),
      );
      for (const w of pending) w.status = undefined;
      if (pending.length > 0) await sleep(2_000);
    }
    expect(unanswered.filter((w) => w.status === undefined)).toEqual([]);

    const events: Event[] = [];
    for (let cursor: string | undefined; ;) {
      const res = await fetch(
        `${service.url}/changes?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        { headers: { authorization: auth } },
      );
      const page = ChangesPageSchema.parse(await res.json());
      events.push(...page.items);
      cursor = page.nextCursor;
      if (page.items.length === 0) break;
    }

    // Every event is explained by a write that was sent, and every acknowledged write by exactly one event.
    const problems: string[] = [];
    const creates = new Map(writes.filter((w) => w.kind === 'create').map((w) => [w.mark, w]));
    const patches = new Map(writes.filter((w) => w.kind === 'patch').map((w) => [w.mark, w]));
    const createdFor = new Map<string, string[]>();
    const history = new Map<string, { version: number; description: string | null; tags: string[] }>();
    const explained = new Set<Write>();
    const deleted = new Set<string>();
    for (const event of events) {
      if (event.type === 'task.created') {
        const { task } = event.data;
        createdFor.set(task.title, [...(createdFor.get(task.title) ?? []), task.id]);
        if (!creates.has(task.title)) problems.push(`task.created for no create sent: ${task.title}`);
        if (task.version !== 1) problems.push(`task ${task.id} created at version ${task.version}`);
        history.set(task.id, {
          version: task.version,
          description: task.description,
          tags: task.tags.map((t) => t.id),
        });
      } else if (event.type === 'task.updated') {
        const { task } = event.data;
        const earlier = history.get(task.id);
        if (!earlier || deleted.has(task.id)) {
          problems.push(`task.updated of task ${task.id} before its creation or after its deletion`);
          continue;
        }
        if (task.version !== earlier.version + 1)
          problems.push(`task ${task.id}: version ${task.version} after ${earlier.version}`);
        const patch = task.description === earlier.description ? undefined : patches.get(task.description ?? '');
        const linked = task.tags.map((t) => t.id).filter((id) => !earlier.tags.includes(id));
        const links = writes.filter((w) => w.kind === 'link' && w.taskId === task.id && linked.includes(w.mark));
        if (patch?.taskId === task.id) explained.add(patch);
        else if (linked.length === 1 && links.length > 0) links.forEach((w) => explained.add(w));
        else problems.push(`task.updated of task ${task.id} at version ${task.version} that no write sent explains`);
        history.set(task.id, {
          version: task.version,
          description: task.description,
          tags: task.tags.map((t) => t.id),
        });
      } else if (event.type === 'task.deleted') {
        const { taskId } = event.data;
        if (deleted.has(taskId)) problems.push(`task ${taskId} deleted twice`);
        deleted.add(taskId);
        if (!writes.some((w) => w.kind === 'delete' && w.taskId === taskId))
          problems.push(`task.deleted of task ${taskId} that no delete sent`);
      }
    }
    for (const write of writes) {
      if (write.kind === 'create') {
        const ids = createdFor.get(write.mark) ?? [];
        const task = TaskSchema.safeParse(write.answer);
        if (ids.length !== 1) problems.push(`create ${write.mark} (answered ${write.status}) made ${ids.length} tasks`);
        else if (!task.success || task.data.id !== ids[0])
          problems.push(`create ${write.mark}: the answer names another task than its event`);
      }
      if (write.kind === 'patch' && write.status === 200 && !explained.has(write))
        problems.push(`patch ${write.mark} acknowledged without its event`);
      if (write.kind === 'link' && write.status === 201 && !explained.has(write))
        problems.push(`link ${write.path} acknowledged without its event`);
      if (write.kind === 'delete' && write.status === 204 && !deleted.has(write.taskId ?? ''))
        problems.push(`delete of ${write.taskId} acknowledged without its event`);
    }
    // What exists now is what the events say exists.
    for (const [taskId] of history) {
      const res = await fetch(`${service.url}/tasks/${taskId}`, { headers: { authorization: auth } });
      if (res.status !== (deleted.has(taskId) ? 404 : 200)) problems.push(`task ${taskId} answers ${res.status}`);
    }
    console.log(
      `write faults (${process.env.TEST_DB}): ${writes.length} writes, ${firstUnanswered} unanswered at the first crash, ${unanswered.length} retried in all, ` +
        `${events.length} events, ${writes.filter((w) => w.status !== undefined && w.status < 300).length} acknowledged`,
    );
    expect(problems).toEqual([]);

    // At least once to the webhook: every event, across both kills (a lease cut by a kill runs out within 5 s).
    const wanted = new Set(events.map((e) => e.id));
    const received = () => new Set(receiver.received('/all').map((r) => r.event.id));
    const until = Date.now() + 60_000;
    while ([...wanted].some((id) => !received().has(id)) && Date.now() < until) await sleep(500);
    expect([...wanted].filter((id) => !received().has(id))).toEqual([]);
    expect(receiver.received('/all').every((r) => r.verified)).toBe(true);
  }, 420_000);
});
