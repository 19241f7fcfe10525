import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import {
  chmod,
  chown,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rename,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip, gunzipSync, gzipSync } from 'node:zlib';
import path from 'node:path';
import pg from 'pg';
import tar from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AuthResultSchema } from '../contract/auth.js';
import { startEmbeddedPostgres } from '../server/db/embedded-postgres.js';
import { emptyDatabase, serverReachableTempDir } from './support/databases.js';
import { startObjectStore, type TestObjectStore } from './support/object-store.js';
import { runCli, spawnCli, spawnService, startProcess, type SpawnedService } from './support/processes.js';

// `npm run dump` / `npm run restore` as an operator runs them (the built CLI), around a service
// process populated through its API. The embedded default runs once per run; DATABASE_URL runs on
// the project's server (Debian's PostgreSQL 15 in the "postgres" project).
const project = process.env.TEST_DB;
const ADMIN = { email: 'root@example.test', password: 'admin password long' };
const PASSWORD = 'long enough password';

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');
const Json = z.record(z.unknown());
const Page = z.object({ items: z.array(Json), nextCursor: z.string().nullable().optional() });

/** Where a service keeps its data: a DATA_DIR, and a DATABASE_URL (or none: the embedded server). */
interface Place {
  dataDir: string;
  env: Record<string, string>;
  /** A connection string to its database; the embedded server is started if it does not run, and stopped by release(). */
  database(): Promise<{ url: string; release(): Promise<void> }>;
}

async function embeddedPlace(prefix: string): Promise<Place> {
  const dataDir = await serverReachableTempDir(prefix);
  return {
    dataDir,
    env: {},
    database: async () => {
      const server = await startEmbeddedPostgres(dataDir);
      return { url: server.url, release: () => (server.adopted ? Promise.resolve() : server.stop()) };
    },
  };
}

async function externalPlace(
  prefix: string,
  extra: Record<string, string> = {},
): Promise<Place & { drop(): Promise<void> }> {
  const dataDir = await serverReachableTempDir(prefix);
  const db = await emptyDatabase();
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

const serviceEnv = (place: Place) => ({
  ...place.env,
  ADMIN_EMAIL: ADMIN.email,
  ADMIN_PASSWORD: ADMIN.password,
  RATE_LIMIT_PER_MINUTE: '0',
  WEB_CONCURRENCY: '1',
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  // One failed attempt, then the next a day later: nothing changes while the test compares.
  WEBHOOK_RETRY_SCHEDULE: '86400',
});

function client(base: string, token?: string) {
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

async function ok(call: Promise<{ status: number; json: unknown }>, status = 200): Promise<Record<string, unknown>> {
  const res = await call;
  expect(res.status, JSON.stringify(res.json)).toBe(status);
  return Json.parse(res.json);
}

interface Population {
  tokens: { admin: string; alice: string; bob: string };
  /** Alice's /changes cursor after everything written before the dump. */
  cursor: string;
  /** sha256 of every uploaded file, by attachment id. */
  files: Map<string, string>;
}

/** Users, tags, tasks with tags and an assignee, attachments, a webhook with its deliveries, and the events of all that. */
async function populate(base: string): Promise<Population> {
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
async function apiView(base: string, tokens: Population['tokens']) {
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
  return {
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
async function databaseView(url: string): Promise<Record<string, unknown>> {
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
          ? `SELECT user_id, sum(tasks) AS tasks, sum(tags) AS tags, sum(webhooks) AS webhooks, sum(storage_bytes) AS storage_bytes FROM user_holdings GROUP BY user_id
             HAVING sum(tasks) <> 0 OR sum(tags) <> 0 OR sum(webhooks) <> 0 OR sum(storage_bytes) <> 0`
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

async function dbView(place: Place): Promise<Record<string, unknown>> {
  const { url, release } = await place.database();
  try {
    return await databaseView(url);
  } finally {
    await release();
  }
}

async function stop(service: SpawnedService): Promise<void> {
  service.child.kill('SIGTERM');
  expect(await service.exited).toBe(0);
}

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => ({ code: 0, stderr: '' }),
    (error: unknown) => z.object({ code: z.number(), stderr: z.string() }).parse(error),
  );

/** A command's stderr ends with its one-line failure, every line its own (no stack trace). */
function expectOneLineFailure(command: string, stderr: string, message: RegExp): void {
  const lines = stderr.trim().split('\n');
  for (const line of lines) expect.soft(line, stderr).toMatch(new RegExp(`^${command}: `));
  expect.soft(lines.at(-1), stderr).toMatch(message);
}

/** Whether the embedded PostgreSQL of `dataDir` runs (its postmaster.pid names a live process). */
async function postgresRuns(dataDir: string): Promise<boolean> {
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
const archiveDir = () => mkdtemp(path.join(tmpdir(), 'task-service-archives-'));

interface Entry {
  name: string;
  data: Buffer;
}

async function entriesOf(file: string): Promise<Entry[]> {
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

async function writeArchive(file: string, entries: Entry[]): Promise<void> {
  const pack = tar.pack();
  const writing = pipeline(pack, createGzip(), createWriteStream(file));
  for (const { name, data } of entries) pack.entry({ name, size: data.length, mode: 0o600 }, data);
  pack.finalize();
  await writing;
}

/** The archive's entries with its manifest changed by `edit`. */
function withManifest(entries: Entry[], edit: (manifest: Record<string, unknown>) => string): Entry[] {
  return entries.map((entry) =>
    entry.name === 'manifest.json'
      ? { name: entry.name, data: Buffer.from(edit(Json.parse(JSON.parse(entry.data.toString('utf8'))))) }
      : entry,
  );
}

/** Nothing in the target: no table, no sequence, no function of the schema, no stored object. */
async function expectEmptyTarget(place: Place): Promise<void> {
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
async function roundTrip(source: Place, target: Place, archive: string): Promise<void> {
  const running = await startProcess(source.dataDir, serviceEnv(source));
  let restored: (SpawnedService & { url: string }) | undefined;
  try {
    const population = await populate(running.url);
    const before = { api: await apiView(running.url, population.tokens), db: await dbView(source) };
    expect(before.api.attachments.map((a) => [String(a.id), a.content])).toEqual(
      expect.arrayContaining([...population.files]),
    );

    // Online: the service keeps running (on the embedded default, the dump uses its server).
    const dumped = await runCli('dump', [archive], source.dataDir, source.env);
    expect(dumped.stdout).toMatch(/^wrote .* rows in \d+ tables, 2 attachments$/m);
    expect(await dbView(source)).toEqual(before.db);

    const restoring = await runCli('restore', [archive], target.dataDir, target.env);
    expect(restoring.stdout).toMatch(/^restored .*, 2 attachments$/m);
    expect(await dbView(target)).toEqual(before.db);

    restored = await startProcess(target.dataDir, serviceEnv(target));
    expect(await apiView(restored.url, population.tokens)).toEqual(before.api);

    // It keeps working: new writes, and the feed continues from a cursor taken before the dump.
    const asAlice = client(restored.url, population.tokens.alice);
    expect(Page.parse((await asAlice('GET', `/changes?cursor=${population.cursor}`)).json).items).toEqual([]);
    const task = await ok(
      asAlice('POST', '/tasks', { title: 'After the restore', tagIds: [String(before.api.tags[0]?.id)] }),
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

describe.runIf(project === 'embedded')('dump and restore on the embedded default', () => {
  const made: string[] = [];
  afterAll(() => Promise.all(made.map((dir) => rm(dir, { recursive: true, force: true }))));

  it('round-trips a running service into a new data directory: every row, every attachment byte, and the event feed goes on', async () => {
    const source = await embeddedPlace('task-service-dump-');
    const target = await embeddedPlace('task-service-restore-');
    made.push(source.dataDir, target.dataDir);
    await roundTrip(source, target, path.join(source.dataDir, 'backup.tar.gz'));
  }, 300_000);
});

describe.runIf(project === 'embedded')('dump and restore stopped midway, on the embedded default', () => {
  // A service populated (with one large attachment, so that writing the archive takes a moment), then
  // stopped: each command starts the embedded server itself, and must stop it again whatever happens.
  let source: Place;
  let archive: string;
  let archives: string;
  const made: string[] = [];
  beforeAll(async () => {
    source = await embeddedPlace('task-service-dump-');
    archives = await archiveDir();
    made.push(source.dataDir, archives);
    const running = await startProcess(source.dataDir, serviceEnv(source));
    try {
      const { tokens } = await populate(running.url);
      const asAlice = client(running.url, tokens.alice);
      const task = await ok(asAlice('POST', '/tasks', { title: 'Large file' }), 201);
      const form = new FormData();
      form.append('file', new Blob([randomBytes(24 * 1024 * 1024)]), 'large.bin');
      await ok(asAlice('POST', `/tasks/${String(task.id)}/attachments`, form), 201);
    } finally {
      await stop(running);
    }
    archive = path.join(archives, 'good.tar.gz');
    await runCli('dump', [archive], source.dataDir, source.env);
  }, 180_000);
  afterAll(() => Promise.all(made.map((dir) => rm(dir, { recursive: true, force: true }))));

  /** Nothing of a failed dump anywhere: no file in the archives' directory but the good one, no server running. */
  async function expectNothingLeft(): Promise<void> {
    expect(await readdir(archives)).toEqual(['good.tar.gz']);
    expect(
      (await readdir(source.dataDir)).filter((name) => name.startsWith('.dump-') || name.includes('partial')),
    ).toEqual([]);
    expect(await postgresRuns(source.dataDir)).toBe(false);
  }

  it('a missing or a damaged attachment: one line naming it, exit 1, no partial file, no plaintext copy, no server left running', async () => {
    const objects = path.join(source.dataDir, 'attachments', 'objects');
    let notes: string | undefined;
    for (const name of await readdir(objects))
      if ((await readFile(path.join(objects, name), 'utf8').catch(() => '')) === 'plain notes\n') notes = name;
    if (!notes) throw new Error('the notes attachment is not in storage');
    const file = path.join(objects, notes);
    const out = path.join(archives, 'failed.tar.gz');

    await rename(file, `${file}.away`);
    try {
      const missing = await failure(runCli('dump', [out], source.dataDir, source.env));
      expect(missing.code).toBe(1);
      expectOneLineFailure(
        'dump',
        missing.stderr,
        new RegExp(`^dump: The bytes of attachment ${notes} are missing from storage`),
      );
      await expectNothingLeft();
    } finally {
      await rename(`${file}.away`, file);
    }

    await writeFile(file, 'Plain notes\n');
    try {
      const damaged = await failure(runCli('dump', [out], source.dataDir, source.env));
      expect(damaged.code).toBe(1);
      expectOneLineFailure(
        'dump',
        damaged.stderr,
        new RegExp(`^dump: The stored bytes of attachment ${notes} do not match`),
      );
      await expectNothingLeft();
    } finally {
      await writeFile(file, 'plain notes\n');
    }
  }, 120_000);

  it('SIGTERM or SIGINT while it writes: exit 1 in one line, no partial file, no server left running', async () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const dump = spawnCli('dump', [path.join(archives, 'stopped.tar.gz')], source.dataDir, source.env, (line) => {
        if (/^dump: read /.test(line)) dump.child.kill(signal);
      });
      expect(await dump.exited, dump.stderr()).toBe(1);
      expectOneLineFailure('dump', dump.stderr(), new RegExp(`^dump: stopped by ${signal}: no archive was written$`));
      await expectNothingLeft();
    }
  }, 120_000);

  /**
   * A restore of `file` into a new data directory, stopped by `signal` at the stderr line `at`:
   * exit 1 in one line, no server left, and a target that `npm start` refuses in one line until
   * the next restore has finished it.
   */
  async function interruptedRestore(file: string, signal: 'SIGTERM' | 'SIGINT', at: RegExp): Promise<void> {
    const target = await embeddedPlace('task-service-restore-');
    made.push(target.dataDir);
    const restore = spawnCli('restore', [file], target.dataDir, target.env, (line) => {
      if (at.test(line)) restore.child.kill(signal);
    });
    expect(await restore.exited, restore.stderr()).toBe(1);
    expectOneLineFailure(
      'restore',
      restore.stderr(),
      new RegExp(`^restore: stopped by ${signal}: the restore is unfinished; run it again to finish it$`),
    );
    expect(await postgresRuns(target.dataDir)).toBe(false);

    const service = spawnService(target.dataDir, serviceEnv(target));
    expect(await service.exited, service.stderr()).toBe(1);
    expect(service.stderr().trim()).toMatch(
      /^task-service: The database holds an unfinished restore: run `npm run restore -- FILE` again with the same archive to finish it$/,
    );
    expect(await postgresRuns(target.dataDir)).toBe(false);

    const again = await runCli('restore', [file], target.dataDir, target.env);
    expect(again.stdout).toMatch(/^restored .*, 3 attachments$/m);
    expect(await dbView(target)).toEqual(await dbView(source));
    const restarted = await startProcess(target.dataDir, serviceEnv(target));
    await stop(restarted);
  }

  it('SIGTERM while it moves the transaction counter on: the target is refused by the service, and the next restore finishes it', async () => {
    // Two million transaction ids to spend: seconds, so the signal comes while it runs.
    const entries = withManifest(await entriesOf(archive), (m) =>
      JSON.stringify({ ...m, nextTransactionId: String(BigInt(String(m.nextTransactionId)) + 2_000_000n) }, null, 2),
    );
    const far = path.join(archives, 'far.tar.gz');
    await writeArchive(far, entries);
    try {
      await interruptedRestore(far, 'SIGTERM', /^restore: advancing transaction ids/);
    } finally {
      await rm(far, { force: true });
    }
  }, 300_000);

  it('SIGINT while it loads: the target is refused by the service, and the next restore finishes it', async () => {
    await interruptedRestore(archive, 'SIGINT', /^restore: loading /);
  }, 300_000);
});

// Between the embedded server (PostgreSQL 18) and TEST_DATABASE_URL's (Debian's 15), both ways.
describe.runIf(project === 'postgres')('moving between the embedded server and an external PostgreSQL', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(() => Promise.all(cleanups.map((cleanup) => cleanup())));
  const embedded = async (prefix: string) => {
    const made = await embeddedPlace(prefix);
    cleanups.push(() => rm(made.dataDir, { recursive: true, force: true }));
    return made;
  };
  const external = async (prefix: string) => {
    const made = await externalPlace(prefix);
    cleanups.push(made.drop);
    return made;
  };

  it('embedded to external', async () => {
    const source = await embedded('task-service-dump-');
    await roundTrip(source, await external('task-service-restore-'), path.join(source.dataDir, 'backup.tar.gz'));
  }, 300_000);

  it('external to embedded', async () => {
    const source = await external('task-service-dump-');
    await roundTrip(source, await embedded('task-service-restore-'), path.join(source.dataDir, 'backup.tar.gz'));
  }, 300_000);
});

describe('dump and restore with DATABASE_URL', () => {
  const places: { drop(): Promise<void> }[] = [];
  afterAll(() => Promise.all(places.map((place) => place.drop())));
  const place = async (prefix: string, extra?: Record<string, string>) => {
    const made = await externalPlace(prefix, extra);
    places.push(made);
    return made;
  };

  it('round-trips into an empty database and data directory', async () => {
    const source = await place('task-service-dump-');
    await roundTrip(source, await place('task-service-restore-'), path.join(source.dataDir, 'backup.tar.gz'));
  }, 300_000);

  describe.runIf(project === 'embedded')('and S3 storage', () => {
    const stores: TestObjectStore[] = [];
    beforeAll(async () => {
      stores.push(await startObjectStore(), await startObjectStore());
    });
    afterAll(() => Promise.all(stores.map((store) => store.close())));

    it('round-trips into an empty database and an empty bucket', async () => {
      const [from, to] = stores;
      if (!from || !to) throw new Error('no object stores');
      const source = await place('task-service-dump-', from.env);
      await roundTrip(source, await place('task-service-restore-', to.env), path.join(source.dataDir, 'backup.tar.gz'));
    }, 300_000);
  });

  describe('refuses', () => {
    let source: Place;
    let archive: string;
    beforeAll(async () => {
      source = await place('task-service-dump-');
      const running = await startProcess(source.dataDir, serviceEnv(source));
      try {
        await populate(running.url);
      } finally {
        await stop(running);
      }
      archive = path.join(source.dataDir, 'backup.tar.gz');
      await runCli('dump', [archive], source.dataDir, source.env);
    }, 120_000);

    it('a target that holds data, in one line, changing nothing', async () => {
      const before = await dbView(source);
      const { code, stderr } = await failure(runCli('restore', [archive], source.dataDir, source.env));
      expect(code).toBe(1);
      expect(stderr).toMatch(
        /^restore: The target database already holds data \(rows in .*\): restore into an empty one/,
      );
      expect(stderr.trim().split('\n')).toHaveLength(1);
      expect(await dbView(source)).toEqual(before);
    });

    it('an archive whose attachment bytes do not match their sha256, or that is cut short, leaving the target empty', async () => {
      // Flip one byte inside the text attachment's entry (the tar stays well-formed, the gzip is made anew).
      const tar = gunzipSync(await import('node:fs/promises').then((fs) => fs.readFile(archive)));
      const at = tar.indexOf('plain notes');
      expect(at).toBeGreaterThan(0);
      tar[at] = 'P'.charCodeAt(0);
      const tampered = path.join(source.dataDir, 'tampered.tar.gz');
      await writeFile(tampered, gzipSync(tar));
      const cut = path.join(source.dataDir, 'cut.tar.gz');
      const whole = await import('node:fs/promises').then((fs) => fs.readFile(archive));
      await writeFile(cut, whole.subarray(0, Math.floor(whole.length / 2)));

      const target = await place('task-service-restore-');
      for (const [file, message] of [
        [
          tampered,
          /^restore: The bytes of attachment [0-9a-f-]{36} in the archive do not match their sha256 in the manifest: the archive is damaged$/,
        ],
        [cut, /^restore: .*cut\.tar\.gz is not a readable backup archive \(.*\)$/],
      ] as const) {
        const { code, stderr } = await failure(runCli('restore', [file], target.dataDir, target.env));
        expect(code, file).toBe(1);
        expect(stderr.trim(), file).toMatch(message);
      }
      // Nothing was written: the same target takes the good archive.
      const good = await runCli('restore', [archive], target.dataDir, target.env);
      expect(good.stdout).toMatch(/^restored /m);
      expect(await dbView(target)).toEqual(await dbView(source));
    }, 120_000);

    it('an archive name that exists, a symlink, or a directory someone else may write: nothing written there; a new archive is mode 0600', async () => {
      const dir = await archiveDir();
      try {
        // A file "another user" made at the name, for everyone to write.
        const planted = path.join(dir, 'planted.tar.gz');
        await writeFile(planted, 'theirs');
        await chmod(planted, 0o666);
        if (process.getuid?.() === 0) await chown(planted, 65534, 65534);
        const overPlanted = await failure(runCli('dump', [planted], source.dataDir, source.env));
        expect(overPlanted.code).toBe(1);
        expectOneLineFailure('dump', overPlanted.stderr, /^dump: .*planted\.tar\.gz exists already: .*$/);
        expect(await readFile(planted, 'utf8')).toBe('theirs');

        // A symlink at the name, to a file elsewhere.
        const elsewhere = path.join(dir, 'elsewhere');
        await writeFile(elsewhere, 'keep');
        const link = path.join(dir, 'link.tar.gz');
        await symlink(elsewhere, link);
        const overLink = await failure(runCli('dump', [link], source.dataDir, source.env));
        expect(overLink.code).toBe(1);
        expectOneLineFailure('dump', overLink.stderr, /^dump: .*link\.tar\.gz exists already: .*$/);
        expect(await readlink(link)).toBe(elsewhere);
        expect(await readFile(elsewhere, 'utf8')).toBe('keep');

        // A directory that others may write (where they could plant names), and one of another user.
        const open = path.join(dir, 'open');
        await mkdir(open);
        await chmod(open, 0o777);
        const intoOpen = await failure(runCli('dump', [path.join(open, 'a.tar.gz')], source.dataDir, source.env));
        expect(intoOpen.code).toBe(1);
        expectOneLineFailure('dump', intoOpen.stderr, /^dump: .*open is writable by other users: .*$/);
        expect(await readdir(open)).toEqual([]);
        if (process.getuid?.() === 0) {
          const theirs = path.join(dir, 'theirs');
          await mkdir(theirs, { mode: 0o755 });
          await chown(theirs, 65534, 65534);
          const intoTheirs = await failure(runCli('dump', [path.join(theirs, 'a.tar.gz')], source.dataDir, source.env));
          expect(intoTheirs.code).toBe(1);
          expectOneLineFailure('dump', intoTheirs.stderr, /^dump: .*theirs belongs to another user: .*$/);
          expect(await readdir(theirs)).toEqual([]);
        }

        const fresh = path.join(dir, 'fresh.tar.gz');
        await runCli('dump', [fresh], source.dataDir, source.env);
        expect((await stat(fresh)).mode & 0o777).toBe(0o600);
        expect((await readdir(dir)).sort()).toEqual(
          [
            'elsewhere',
            'fresh.tar.gz',
            'link.tar.gz',
            'open',
            'planted.tar.gz',
            ...(process.getuid?.() === 0 ? ['theirs'] : []),
          ].sort(),
        );
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }, 120_000);

    it('a crafted archive (a duplicate or unexpected entry, an unlisted one, values out of range, a large manifest) before writing anything', async () => {
      const entries = await entriesOf(archive);
      const users = entries.find((e) => e.name === 'tables/users.copy');
      if (!users) throw new Error('no users table in the archive');
      // The same accounts under new ids and emails, ahead of the genuine entry that the manifest describes.
      const impostors = users.data
        .toString('utf8')
        .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, () => randomUUID())
        .replace(/@example\.test/g, '@impostor.test');
      const usersAt = entries.indexOf(users);
      const beforeManifest = (entry: Entry) => [...entries.slice(0, -1), entry, ...entries.slice(-1)];
      const pretty = (manifest: Record<string, unknown>) => JSON.stringify(manifest, null, 2);
      const crafted: [string, Entry[], RegExp][] = [
        [
          'duplicate',
          [...entries.slice(0, usersAt), { name: users.name, data: Buffer.from(impostors) }, ...entries.slice(usersAt)],
          /^restore: The archive holds tables\/users\.copy twice: it is damaged or crafted$/,
        ],
        [
          'unexpected',
          beforeManifest({ name: 'extra.txt', data: Buffer.from('hello') }),
          /^restore: The archive holds an unexpected entry extra\.txt: it is damaged or crafted$/,
        ],
        [
          'unlisted',
          beforeManifest({ name: `attachments/${randomUUID()}`, data: Buffer.from('unlisted') }),
          /^restore: The archive holds attachments\/[0-9a-f-]{36}, which its manifest does not list: it is damaged or crafted$/,
        ],
        [
          'size',
          withManifest(entries, (m) => {
            const [first, ...rest] = z.array(Json).parse(m.attachments);
            return pretty({ ...m, attachments: [{ ...first, size: 2 ** 60 }, ...rest] });
          }),
          /^restore: The archive's manifest is out of range: attachments\.0\.size .*$/,
        ],
        [
          'count',
          withManifest(entries, (m) => {
            const [first, ...rest] = z.array(Json).parse(m.tables);
            return pretty({ ...m, tables: [{ ...first, rows: 10 ** 12 }, ...rest] });
          }),
          /^restore: The archive's manifest is out of range: tables\.0\.rows .*$/,
        ],
        [
          'large-manifest',
          withManifest(entries, (m) => `${pretty(m)}${' '.repeat(32 * 1024 * 1024)}`),
          /^restore: The archive's manifest is larger than its entries need \(\d+ bytes\): it is damaged or crafted$/,
        ],
        [
          'transaction-ids',
          withManifest(entries, (m) => pretty({ ...m, nextTransactionId: '1099511627776' })),
          /^restore: The archive's manifest is out of range: nextTransactionId .*$/,
        ],
      ];
      let target = await place('task-service-restore-');
      for (const [name, craftedEntries, message] of crafted) {
        target = await place('task-service-restore-');
        const file = path.join(source.dataDir, `${name}.tar.gz`);
        await writeArchive(file, craftedEntries);
        const { code, stderr } = await failure(runCli('restore', [file], target.dataDir, target.env));
        expect.soft(code, name).toBe(1);
        expectOneLineFailure('restore', stderr, message);
        await expectEmptyTarget(target);
      }
      const good = await runCli('restore', [archive], target.dataDir, target.env);
      expect(good.stdout).toMatch(/^restored /m);
      expect(await dbView(target)).toEqual(await dbView(source));
    }, 180_000);
  });
});
