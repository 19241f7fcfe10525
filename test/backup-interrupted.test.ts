import { randomBytes } from 'node:crypto';
import { readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, spawnCli, spawnService, startServiceProcess } from './support/processes.js';
import {
  project,
  embeddedPlace,
  serviceEnv,
  client,
  ok,
  populate,
  dbView,
  stop,
  failure,
  expectOneLineFailure,
  postgresRuns,
  archiveDir,
  entriesOf,
  writeArchive,
  withManifest,
  type Place,
} from './support/backup.js';

// `npm run dump` / `npm run restore` stopped midway (a signal, a missing attachment) on the embedded
// default: each leaves no partial file and no server it started, and an interrupted restore's target
// is refused until the next restore finishes it.
describe.runIf(project === 'embedded')('dump and restore stopped midway, on the embedded default', () => {
  // A service populated (with one large attachment, so that writing the archive takes a moment), then
  // stopped: each command starts the embedded server itself, and must stop it again whatever happens.
  let source: Place;
  let archive: string;
  let archives: string;
  const made: string[] = [];
  beforeAll(async () => {
    source = await embeddedPlace('task-service-dump-', 'ready');
    archives = await archiveDir();
    made.push(source.dataDir, archives);
    const running = await startServiceProcess({ DATA_DIR: source.dataDir, ...serviceEnv(source) });
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
    // A new data directory: a restore target must be empty, and the restore makes its cluster.
    const target = await embeddedPlace('task-service-restore-', 'new');
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

    const service = spawnService({ DATA_DIR: target.dataDir, ...serviceEnv(target) });
    expect(await service.exited, service.stderr()).toBe(1);
    expect(service.stderr().trim()).toMatch(
      /^task-service: The database holds an unfinished restore: run `npm run restore -- FILE` again with the same archive to finish it$/,
    );
    expect(await postgresRuns(target.dataDir)).toBe(false);

    const again = await runCli('restore', [file], target.dataDir, target.env);
    expect(again.stdout).toMatch(/^restored .*, 3 attachments$/m);
    expect(await dbView(target)).toEqual(await dbView(source));
    const restarted = await startServiceProcess({ DATA_DIR: target.dataDir, ...serviceEnv(target) });
    await stop(restarted);
  }

  it('SIGTERM while it moves the transaction counter on: the target is refused by the service, and the next restore finishes it', async () => {
    // 300,000 transaction ids to spend: three rounds of 100,000 and a second of work, so the signal
    // (sent as it starts) comes while it runs; the next restore spends what is left. Every id is a
    // commit of the target's server: more would cost CPU and show nothing more.
    const entries = withManifest(await entriesOf(archive), (m) =>
      JSON.stringify({ ...m, nextTransactionId: String(BigInt(String(m.nextTransactionId)) + 300_000n) }, null, 2),
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
