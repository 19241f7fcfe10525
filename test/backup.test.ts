import { randomUUID } from 'node:crypto';
import { chmod, chown, mkdir, readdir, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { gunzipSync, gzipSync } from 'node:zlib';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startObjectStore, type TestObjectStore } from './support/object-store.js';
import { runCli, startServiceProcess } from './support/processes.js';
import {
  project,
  Json,
  embeddedPlace,
  externalPlace,
  serviceEnv,
  populate,
  dbView,
  stop,
  failure,
  expectOneLineFailure,
  archiveDir,
  entriesOf,
  writeArchive,
  withManifest,
  expectEmptyTarget,
  roundTrip,
  type Place,
  type Entry,
} from './support/backup.js';

// `npm run dump` / `npm run restore` as an operator runs them (the built CLI), around a service
// process populated through its API. The embedded default runs once per run; DATABASE_URL runs on
// the project's server (Debian's PostgreSQL 15 in the "postgres" project). Interrupted runs:
// backup-interrupted.test.ts.
describe.runIf(project === 'embedded')('dump and restore on the embedded default', () => {
  const made: string[] = [];
  afterAll(() => Promise.all(made.map((dir) => rm(dir, { recursive: true, force: true }))));

  it('round-trips a running service into a new data directory: every row, every attachment byte, and the event feed goes on', async () => {
    const source = await embeddedPlace('task-service-dump-', 'ready');
    // A new data directory: a restore target must be empty, and the restore makes its cluster.
    const target = await embeddedPlace('task-service-restore-', 'new');
    made.push(source.dataDir, target.dataDir);
    await roundTrip(source, target, path.join(source.dataDir, 'backup.tar.gz'));
  }, 300_000);
});

describe.runIf(project === 'postgres')('moving between the embedded server and an external PostgreSQL', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(() => Promise.all(cleanups.map((cleanup) => cleanup())));
  const embedded = async (prefix: string, from: 'new' | 'ready') => {
    const made = await embeddedPlace(prefix, from);
    cleanups.push(() => rm(made.dataDir, { recursive: true, force: true }));
    return made;
  };
  const external = async (prefix: string, from: 'new' | 'ready') => {
    const made = await externalPlace(prefix, from);
    cleanups.push(made.drop);
    return made;
  };

  it('embedded to external', async () => {
    const source = await embedded('task-service-dump-', 'ready');
    await roundTrip(source, await external('task-service-restore-', 'new'), path.join(source.dataDir, 'backup.tar.gz'));
  }, 300_000);

  it('external to embedded', async () => {
    const source = await external('task-service-dump-', 'ready');
    // A new data directory: the restore makes the embedded cluster.
    await roundTrip(source, await embedded('task-service-restore-', 'new'), path.join(source.dataDir, 'backup.tar.gz'));
  }, 300_000);
});

describe('dump and restore with DATABASE_URL', () => {
  const places: { drop(): Promise<void> }[] = [];
  afterAll(() => Promise.all(places.map((place) => place.drop())));
  // Sources are cloned from the migrated template; restore targets are empty databases.
  const place = async (prefix: string, from: 'new' | 'ready', extra?: Record<string, string>) => {
    const made = await externalPlace(prefix, from, extra);
    places.push(made);
    return made;
  };

  it('round-trips into an empty database and data directory', async () => {
    const source = await place('task-service-dump-', 'ready');
    await roundTrip(source, await place('task-service-restore-', 'new'), path.join(source.dataDir, 'backup.tar.gz'));
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
      const source = await place('task-service-dump-', 'ready', from.env);
      await roundTrip(
        source,
        await place('task-service-restore-', 'new', to.env),
        path.join(source.dataDir, 'backup.tar.gz'),
      );
    }, 300_000);
  });

  describe('refuses', () => {
    let source: Place;
    let archive: string;
    beforeAll(async () => {
      source = await place('task-service-dump-', 'ready');
      const running = await startServiceProcess({ DATA_DIR: source.dataDir, ...serviceEnv(source) });
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

      const target = await place('task-service-restore-', 'new');
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
      let target: Place | undefined;
      for (const [name, craftedEntries, message] of crafted) {
        target = await place('task-service-restore-', 'new');
        const file = path.join(source.dataDir, `${name}.tar.gz`);
        await writeArchive(file, craftedEntries);
        const { code, stderr } = await failure(runCli('restore', [file], target.dataDir, target.env));
        expect.soft(code, name).toBe(1);
        expectOneLineFailure('restore', stderr, message);
        await expectEmptyTarget(target);
      }
      if (!target) throw new Error('no crafted archives');
      const good = await runCli('restore', [archive], target.dataDir, target.env);
      expect(good.stdout).toMatch(/^restored /m);
      expect(await dbView(target)).toEqual(await dbView(source));
    }, 180_000);
  });
});
