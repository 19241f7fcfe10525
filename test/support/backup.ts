// What the backup tests share: places to dump from and restore into (the embedded default or the
// project's server), a service populated through its API, and views of the data to compare.
import { randomBytes } from 'node:crypto';
import { sha256 } from './binary.js';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import path from 'node:path';
import pg from 'pg';
import tar from 'tar-stream';
import { expect } from 'vitest';
import { z } from 'zod';
import { AuthResultSchema } from '../../contract/auth.js';
import { startEmbeddedPostgres } from '../../server/db/embedded-postgres.js';
import { emptyDatabase, freshDatabase, readyDataDir, serverReachableTempDir } from './databases.js';
import { runCli, startServiceProcess, type ServiceProcess, type SpawnedService } from './processes.js';

export const project = process.env.TEST_DB;
export const ADMIN = { email: 'root@example.test', password: 'admin password long' };
export const PASSWORD = 'long enough password';

export const Json = z.record(z.unknown());
export const Page = z.object({ items: z.array(Json), nextCursor: z.string().nullable().optional() });

/** Where a service keeps its data: a DATA_DIR, and a DATABASE_URL (or none: the embedded server). */
export interface Place {
  dataDir: string;
  env: Record<string, string>;
  /** A connection string to its database; the embedded server is started if it does not run, and stopped by release(). */
  database(): Promise<{ url: string; release(): Promise<void> }>;
}

/**
 * The embedded default in a data directory of its own: `new` (empty: what a restore targets, its
 * command makes the cluster), or `ready` (a copy of the run's ready data directory: a source whose
 * service starts without initdb and migrations).
 */
export async function embeddedPlace(prefix: string, from: 'new' | 'ready'): Promise<Place> {
  const dataDir = from === 'ready' ? await readyDataDir(prefix) : await serverReachableTempDir(prefix);
  return {
    dataDir,
    env: {},
    database: async () => {
      const server = await startEmbeddedPostgres(dataDir, { noSync: true });
      return { url: server.url, release: () => (server.adopted ? Promise.resolve() : server.stop()) };
    },
  };
}

/**
 * A DATABASE_URL: `new` (an empty database: what a restore targets), or `ready` (one cloned from the
 * run's migrated template: a source whose service starts without migrating).
 */
export async function externalPlace(
  prefix: string,
  from: 'new' | 'ready',
  extra: Record<string, string> = {},
): Promise<Place & { drop(): Promise<void> }> {
  const dataDir = await serverReachableTempDir(prefix);
  const db = from === 'ready' ? await freshDatabase() : await emptyDatabase();
  return {
    dataDir,
    env: { DATABASE_URL: db.url, ...extra },
    database: () => Promise.resolve({ url: db.url, release: () => Promise.resolve() }),
    drop: async () => {
      await db.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export const serviceEnv = (place: Place) => ({
  ...place.env,
  ADMIN_EMAIL: ADMIN.email,
  ADMIN_PASSWORD: ADMIN.password,
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  // One failed attempt, then the next a day later: nothing changes while the test compares.
  WEBHOOK_RETRY_SCHEDULE: '86400',
});

export function client(base: string, token?: string) {
  return async (
    method: string,
    url: string,
    body?: unknown,
  ): Promise<{ status: number; json: unknown; bytes: Buffer }> => {
    const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
    let payload: string | FormData | undefined;
    if (body instanceof FormData) payload = body;
    else if (body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    const res = await fetch(`${base}${url}`, { method, headers, body: payload });
    const bytes = Buffer.from(await res.arrayBuffer());
    const json: unknown =
      res.headers.get('content-type')?.includes('json') && bytes.length > 0
        ? JSON.parse(bytes.toString('utf8'))
        : undefined;
    return { status: res.status, json, bytes };
  };
}

export async function ok(
  call: Promise<{ status: number; json: unknown }>,
  status = 200,
): Promise<Record<string, unknown>> {
  const res = await call;
  expect(res.status, JSON.stringify(res.json)).toBe(status);
  return Json.parse(res.json);
}

export interface Population {
  tokens: { admin: string; alice: string; bob: string };
  /** Alice's /changes cursor after everything written before the dump. */
  cursor: string;
  /** sha256 of every uploaded file, by attachment id. */
  files: Map<string, string>;
}

/** Users, tags, tasks with tags and an assignee, attachments, a webhook with its deliveries, and the events of all that. */
export async function populate(base: string): Promise<Population> {
  const login = AuthResultSchema.parse(await ok(client(base)('POST', '/auth/login', ADMIN)));
  const alice = AuthResultSchema.parse(
    await ok(
      client(base)('POST', '/auth/register', { email: 'alice@example.test', password: PASSWORD, name: 'Alice' }),
      201,
    ),
  );
  const bob = AuthResultSchema.parse(
    await ok(
      client(base)('POST', '/auth/register', { email: 'bob@example.test', password: PASSWORD, name: 'Bob' }),
      201,
    ),
  );
  const asAlice = client(base, alice.accessToken);
  const asBob = client(base, bob.accessToken);
  const hook = await ok(
    asAlice('POST', '/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['*'], description: 'nowhere' }),
    201,
  );
  const shared = await ok(asAlice('POST', '/projects', { name: 'Shared', description: 'Both of us' }), 201);
  await ok(asAlice('POST', `/projects/${String(shared.id)}/members`, { userId: bob.user.id, role: 'editor' }), 201);
  // The project's own work: a tag and a task carrying it, made by its editor.
  const sharedTag = await ok(asBob('POST', '/tags', { name: 'Team', projectId: shared.id }), 201);
  await ok(
    asBob('POST', '/tasks', {
      title: 'Shared work',
      projectId: shared.id,
      assigneeId: alice.user.id,
      tagIds: [sharedTag.id],
    }),
    201,
  );
  const work = await ok(asAlice('POST', '/tags', { name: 'Work', color: '#aa0000' }), 201);
  const home = await ok(asAlice('POST', '/tags', { name: 'Home' }), 201);
  const first = await ok(
    asAlice('POST', '/tasks', {
      title: 'Write the report',
      description: 'with ünïcödé, a tab\tand a\nnewline',
      priority: 'high',
      assigneeId: bob.user.id,
      tagIds: [work.id],
      dueAt: '2027-01-02T03:04:05.678Z',
    }),
    201,
  );
  await ok(asAlice('POST', '/tasks', { title: 'Buy milk', tagIds: [work.id, home.id] }), 201);
  const doomed = await ok(asBob('POST', '/tasks', { title: 'Short-lived' }), 201);
  await ok(asBob('PATCH', `/tasks/${String(first.id)}`, { status: 'done' }));
  expect((await asBob('DELETE', `/tasks/${String(doomed.id)}`)).status).toBe(204);
  const files = new Map<string, string>();
  for (const [name, bytes] of [
    ['data.bin', randomBytes(300_000)],
    ['notes.txt', Buffer.from('plain notes\n')],
  ] as const) {
    const form = new FormData();
    form.append('file', new Blob([bytes]), name);
    const attachment = await ok(asAlice('POST', `/tasks/${String(first.id)}/attachments`, form), 201);
    files.set(String(attachment.id), sha256(bytes));
  }
  // Every delivery attempted once (it fails: nothing listens there), so nothing moves while the test compares.
  for (let i = 0; ; i++) {
    const deliveries = Page.parse(
      (await asAlice('GET', `/webhooks/${String(hook.id)}/deliveries?limit=100`)).json,
    ).items;
    const unsettled = deliveries.filter(
      (d) =>
        d.state === 'delivering' ||
        (d.state === 'pending' && Date.parse(String(d.nextAttemptAt)) < Date.now() + 3_600_000),
    );
    if (deliveries.length > 0 && unsettled.length === 0) break;
    if (i > 100) throw new Error(`deliveries did not settle: ${JSON.stringify(deliveries)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  // Alice's feed up to her last write (a commit shows once no older transaction runs on the server).
  const Changes = z.object({ items: z.array(Json), nextCursor: z.string() });
  let cursor = '';
  for (let i = 0, uploads = 0; uploads < 2; i++) {
    if (i > 150) throw new Error('the feed did not show the uploads');
    if (i > 0) await new Promise((resolve) => setTimeout(resolve, 200));
    const page = Changes.parse((await asAlice('GET', `/changes?limit=100${cursor ? `&cursor=${cursor}` : ''}`)).json);
    cursor = page.nextCursor;
    uploads += page.items.filter((e) => e.type === 'attachment.created').length;
  }
  return { tokens: { admin: login.accessToken, alice: alice.accessToken, bob: bob.accessToken }, cursor, files };
}

/** What the API shows of everything populate() wrote, attachment bytes as sha256. */
export async function apiView(base: string, tokens: Population['tokens']) {
  const asAdmin = client(base, tokens.admin);
  const asAlice = client(base, tokens.alice);
  const list = async (call: Promise<{ status: number; json: unknown }>) => Page.parse(await ok(call)).items;
  const tasks = await list(asAdmin('GET', '/tasks?limit=100'));
  const attachments = [];
  for (const task of tasks) {
    for (const attachment of await list(asAdmin('GET', `/tasks/${String(task.id)}/attachments`))) {
      const content = await asAdmin('GET', `/attachments/${String(attachment.id)}/content`);
      expect(content.status).toBe(200);
      attachments.push({ id: attachment.id, attachment, content: sha256(content.bytes) });
    }
  }
  const webhooks = await list(asAlice('GET', '/webhooks'));
  const deliveries = [];
  for (const hook of webhooks)
    deliveries.push(...(await list(asAlice('GET', `/webhooks/${String(hook.id)}/deliveries?limit=100`))));
  const projects = await list(asAlice('GET', '/projects?limit=100'));
  const members = [];
  for (const project of projects)
    members.push(...(await list(asAlice('GET', `/projects/${String(project.id)}/members`))));
  return {
    projects,
    members,
    users: await list(asAdmin('GET', '/users?limit=100')),
    tasks,
    tags: await list(asAlice('GET', '/tags?limit=100')),
    attachments,
    webhooks,
    deliveries,
    changes: await list(asAlice('GET', '/changes?limit=100')),
    me: (await asAlice('GET', '/auth/me')).json,
  };
}

/** Every row of every table of the schema (read from the catalog), and where each sequence stands. */
export async function databaseView(url: string): Promise<Record<string, unknown>> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    const { rows: tables } = await db.query<{ name: string }>(
      `SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1`,
    );
    const view: Record<string, unknown> = {};
    for (const { name } of tables) {
      // Restored attachments live under new storage keys; when a migration ran is not data; how a
      // user's holdings are spread over slots is not either, only their sums.
      const source =
        name === 'user_holdings'
          ? `SELECT user_id, sum(tasks) AS tasks, sum(tags) AS tags, sum(webhooks) AS webhooks, sum(storage_bytes) AS storage_bytes,
               sum(projects) AS projects FROM user_holdings GROUP BY user_id
             HAVING sum(tasks) <> 0 OR sum(tags) <> 0 OR sum(webhooks) <> 0 OR sum(storage_bytes) <> 0 OR sum(projects) <> 0`
          : `SELECT * FROM "${name}"`;
      const { rows } = await db.query<{ rows: unknown }>(
        `SELECT coalesce(json_agg(r ORDER BY r::text), '[]') AS rows FROM (SELECT to_jsonb(t) - 'storage_key' - 'applied_at' AS r FROM (${source}) t) x`,
      );
      view[name] = rows[0]?.rows;
    }
    const { rows: sequences } = await db.query<{ name: string }>(
      `SELECT relname AS name FROM pg_class WHERE relkind = 'S' AND relnamespace = current_schema()::regnamespace`,
    );
    for (const { name } of sequences)
      view[`sequence ${name}`] = (await db.query(`SELECT last_value::text, is_called FROM "${name}"`)).rows;
    return view;
  } finally {
    await db.end();
  }
}

export async function dbView(place: Place): Promise<Record<string, unknown>> {
  const { url, release } = await place.database();
  try {
    return await databaseView(url);
  } finally {
    await release();
  }
}

export async function stop(service: SpawnedService): Promise<void> {
  service.child.kill('SIGTERM');
  expect(await service.exited).toBe(0);
}

export const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => ({ code: 0, stderr: '' }),
    (error: unknown) => z.object({ code: z.number(), stderr: z.string() }).parse(error),
  );

/** A command's stderr ends with its one-line failure, every line its own (no stack trace). */
export function expectOneLineFailure(command: string, stderr: string, message: RegExp): void {
  const lines = stderr.trim().split('\n');
  for (const line of lines) expect.soft(line, stderr).toMatch(new RegExp(`^${command}: `));
  expect.soft(lines.at(-1), stderr).toMatch(message);
}

/** Whether the embedded PostgreSQL of `dataDir` runs (its postmaster.pid names a live process). */
export async function postgresRuns(dataDir: string): Promise<boolean> {
  const pid = Number(
    (await readFile(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0],
  );
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A directory of the caller's, only theirs (mode 0700), for archives. */
export const archiveDir = () => mkdtemp(path.join(tmpdir(), 'task-service-archives-'));

export interface Entry {
  name: string;
  data: Buffer;
}

export async function entriesOf(file: string): Promise<Entry[]> {
  const extract = tar.extract();
  const reading = pipeline(createReadStream(file), createGunzip(), extract);
  const entries: Entry[] = [];
  for await (const entry of extract) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
    entries.push({ name: entry.header.name, data: Buffer.concat(chunks) });
  }
  await reading;
  return entries;
}

export async function writeArchive(file: string, entries: Entry[]): Promise<void> {
  const pack = tar.pack();
  const writing = pipeline(pack, createGzip(), createWriteStream(file));
  for (const { name, data } of entries) pack.entry({ name, size: data.length, mode: 0o600 }, data);
  pack.finalize();
  await writing;
}

/** The archive's entries with its manifest changed by `edit`. */
export function withManifest(entries: Entry[], edit: (manifest: Record<string, unknown>) => string): Entry[] {
  return entries.map((entry) =>
    entry.name === 'manifest.json'
      ? { name: entry.name, data: Buffer.from(edit(Json.parse(JSON.parse(entry.data.toString('utf8'))))) }
      : entry,
  );
}

/** Nothing in the target: no table, no sequence, no function of the schema, no stored object. */
export async function expectEmptyTarget(place: Place): Promise<void> {
  const { url, release } = await place.database();
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    const { rows } = await db.query<{ name: string }>(
      `SELECT relname AS name FROM pg_class WHERE relnamespace = current_schema()::regnamespace`,
    );
    expect.soft(rows.map((r) => r.name)).toEqual([]);
  } finally {
    await db.end();
    await release();
  }
  expect.soft(await readdir(path.join(place.dataDir, 'attachments', 'objects')).catch(() => [])).toEqual([]);
}

/** The whole round trip: populate `source`, dump it while it serves, restore into `target`, compare, keep working. */
export async function roundTrip(source: Place, target: Place, archive: string): Promise<void> {
  const running = await startServiceProcess({ DATA_DIR: source.dataDir, ...serviceEnv(source) });
  let restored: ServiceProcess | undefined;
  try {
    const population = await populate(running.url);
    const before = { api: await apiView(running.url, population.tokens), db: await dbView(source) };
    expect(before.api.attachments.map((a) => [String(a.id), a.content])).toEqual(
      expect.arrayContaining([...population.files]),
    );
    // Projects and memberships travel with the rest: the shared project, both members, its task.
    expect(before.api.projects).toEqual([expect.objectContaining({ name: 'Shared', memberCount: 2 })]);
    expect(before.api.members.map((m) => m.role).sort()).toEqual(['admin', 'editor']);
    expect(before.api.tasks.filter((t) => t.projectId === before.api.projects[0]?.id)).toHaveLength(1);

    // Online: the service keeps running (on the embedded default, the dump uses its server).
    const dumped = await runCli('dump', [archive], source.dataDir, source.env);
    expect(dumped.stdout).toMatch(/^wrote .* rows in \d+ tables, 2 attachments$/m);
    expect(await dbView(source)).toEqual(before.db);

    const restoring = await runCli('restore', [archive], target.dataDir, target.env);
    expect(restoring.stdout).toMatch(/^restored .*, 2 attachments$/m);
    expect(await dbView(target)).toEqual(before.db);

    restored = await startServiceProcess({ DATA_DIR: target.dataDir, ...serviceEnv(target) });
    expect(await apiView(restored.url, population.tokens)).toEqual(before.api);

    // It keeps working: new writes, and the feed continues from a cursor taken before the dump.
    const asAlice = client(restored.url, population.tokens.alice);
    expect(Page.parse((await asAlice('GET', `/changes?cursor=${population.cursor}`)).json).items).toEqual([]);
    const task = await ok(
      asAlice('POST', '/tasks', {
        title: 'After the restore',
        tagIds: [String(before.api.tags.find((tag) => tag.projectId === null)?.id)],
      }),
      201,
    );
    const form = new FormData();
    form.append('file', new Blob([Buffer.from('new bytes')]), 'new.txt');
    await ok(asAlice('POST', `/tasks/${String(task.id)}/attachments`, form), 201);
    // The feed shows a commit once no older transaction runs on the server (other tests share it).
    let feed: Record<string, unknown>[] = [];
    for (let i = 0; i < 150 && !feed.some((e) => e.type === 'attachment.created'); i++) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 200));
      feed = Page.parse((await asAlice('GET', `/changes?cursor=${population.cursor}`)).json).items;
    }
    expect(feed[0]?.type).toBe('task.created');
    expect(feed.map((e) => e.type)).toContain('attachment.created');
    expect(Json.parse(feed[0]?.data).task).toMatchObject({ id: task.id });
  } finally {
    await stop(running);
    if (restored) await stop(restored);
  }
}
