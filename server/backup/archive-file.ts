import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { constants, link, lstat, open, realpath, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { BackupError } from './archive.js';

const errorCode = (error: unknown) => (error instanceof Error && 'code' in error ? String(error.code) : undefined);

/**
 * The archive's directory must be the caller's and writable by nobody else, and no directory above
 * it may let someone else swap it (owned by root or the caller, not writable by others unless
 * sticky, as /tmp is): then nobody else can plant a name where the archive is written.
 */
async function checkDirectory(dir: string): Promise<void> {
  const uid = process.geteuid?.();
  const real = await realpath(dir).catch((error: unknown) => {
    throw new BackupError(`Cannot write the archive into ${dir}: ${errorCode(error) ?? String(error)}`);
  });
  const own = await stat(real);
  if (!own.isDirectory()) throw new BackupError(`${dir} is not a directory`);
  if (uid !== undefined && own.uid !== uid)
    throw new BackupError(`${dir} belongs to another user: write the archive into a directory of your own`);
  if ((own.mode & 0o022) !== 0)
    throw new BackupError(
      `${dir} is writable by other users: write the archive into a directory only you can write (mode 0700 or 0755)`,
    );
  for (let above = path.dirname(real); ; above = path.dirname(above)) {
    const info = await stat(above);
    const sticky = (info.mode & 0o1000) !== 0;
    if ((uid !== undefined && info.uid !== 0 && info.uid !== uid) || ((info.mode & 0o022) !== 0 && !sticky))
      throw new BackupError(
        `${above}, above the archive's directory, may be changed by other users: write the archive elsewhere`,
      );
    if (above === path.dirname(above)) break;
  }
}

const alreadyThere = (target: string) =>
  new BackupError(`${target} exists already: a dump never replaces a file, give it a new name`);

/** An archive being written: a file only the caller can read, under a random hidden name beside its final one. */
export interface ArchiveFile {
  handle: FileHandle;
  /** Gives the finished file its name (never replacing a file there). */
  publish(): Promise<void>;
  /** Removes the unfinished file. */
  discard(): Promise<void>;
  /** The same, synchronously, for a process that must exit now. */
  discardNow(): void;
}

/**
 * Creates the file an archive is written to: mode 0600, created exclusively (O_EXCL, not through a
 * symlink) under an unpredictable name, in a directory checked to be the caller's alone.
 */
export async function createArchiveFile(file: string): Promise<ArchiveFile> {
  const target = path.resolve(file);
  await checkDirectory(path.dirname(target));
  if (
    await lstat(target).then(
      () => true,
      () => false,
    )
  )
    throw alreadyThere(target);
  const partial = path.join(
    path.dirname(target),
    `.${path.basename(target)}.${randomBytes(12).toString('hex')}.partial`,
  );
  const handle = await open(
    partial,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    0o600,
  ).catch((error: unknown) => {
    throw new BackupError(`Cannot create the archive beside ${target}: ${errorCode(error) ?? String(error)}`);
  });
  let present = true;
  const discard = async () => {
    if (present) await rm(partial, { force: true });
    present = false;
    // Not awaited: a write stream on the handle closes it when it ends (close() would wait for it).
    handle.close().catch(() => undefined);
  };
  try {
    await handle.chmod(0o600); // whatever the umask
  } catch (error) {
    await discard();
    throw error;
  }
  return {
    handle,
    publish: async () => {
      try {
        // link() fails when the name exists: a file planted meanwhile is never replaced.
        await link(partial, target);
      } catch (error) {
        if (errorCode(error) === 'EEXIST') throw alreadyThere(target);
        // A filesystem without hard links: the directory is the caller's alone, so a checked rename is as safe.
        if (errorCode(error) !== 'EPERM' && errorCode(error) !== 'ENOTSUP') throw error;
        if (
          await lstat(target).then(
            () => true,
            () => false,
          )
        )
          throw alreadyThere(target);
        await rename(partial, target);
        present = false;
        return;
      }
      await rm(partial, { force: true });
      present = false;
    },
    discard,
    discardNow: () => {
      if (present) rmSync(partial, { force: true });
      present = false;
    },
  };
}
