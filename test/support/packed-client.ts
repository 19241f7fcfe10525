// The client package as `npm pack --workspace contract` makes it, packed once for every test file
// that installs it (test/package.test.ts, test/client-weight.test.ts, test/doc-samples.test.ts) and
// kept until the package's files change: packing runs npm and the package's build each time. Files
// asking at once (a fresh checkout) wait for the first to pack rather than each packing its own.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..', '..');
const CONTRACT = path.join(ROOT, 'contract');
const CACHE = path.join(ROOT, '.test-data', 'packed-client');

/** What the package is made of, by name, size and modification time (its build state and dependencies aside). */
async function fingerprint(): Promise<string> {
  const hash = createHash('sha256');
  const entries = await readdir(CONTRACT, { recursive: true, withFileTypes: true });
  const files = entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(CONTRACT, path.join(entry.parentPath, entry.name)))
    .filter((file) => !/^(node_modules|\.tsbuild)\//.test(file))
    .sort();
  for (const file of files) {
    const { size, mtimeMs } = await stat(path.join(CONTRACT, file));
    hash.update(`${file}\0${size}\0${mtimeMs}\n`);
  }
  return hash.digest('hex').slice(0, 16);
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Runs `work` holding the cache's lock (a directory: mkdir is atomic), taken over from a process that died. */
async function locked<T>(work: () => Promise<T>): Promise<T> {
  const lock = path.join(CACHE, 'lock');
  const holderFile = path.join(lock, 'pid');
  await mkdir(CACHE, { recursive: true });
  for (;;) {
    const taken = await mkdir(lock).then(
      () => true,
      (error: unknown) => {
        if (z.object({ code: z.literal('EEXIST') }).safeParse(error).success) return false;
        throw error;
      },
    );
    if (taken) break;
    // No PID yet: its holder has only just made it.
    const holder = Number(await readFile(holderFile, 'utf8').catch(() => '0'));
    if (holder > 0 && !isAlive(holder)) await rm(lock, { recursive: true, force: true });
    else await new Promise((resolve) => setTimeout(resolve, 200));
  }
  try {
    await writeFile(holderFile, String(process.pid));
    return await work();
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

/** The path of the client's tarball (task-service-client-<version>.tgz), packed from this checkout. */
export const packedClient = (): Promise<string> => locked(pack);

async function pack(): Promise<string> {
  // The package's build first (incremental: nothing to do when it is current), as npm pack's prepack
  // would run it: the fingerprint is then that of what gets packed.
  await run(process.execPath, ['build.mjs'], { cwd: CONTRACT });
  const dir = path.join(CACHE, await fingerprint());
  const packed = async () => (existsSync(dir) ? (await readdir(dir)).find((name) => name.endsWith('.tgz')) : undefined);
  const cached = await packed();
  if (cached) return path.join(dir, cached);
  await mkdir(CACHE, { recursive: true });
  const work = await mkdtemp(path.join(CACHE, 'packing-'));
  try {
    const { stdout } = await run('npm', ['pack', '--workspace', 'contract', '--pack-destination', work, '--json'], {
      cwd: ROOT,
    });
    z.tuple([z.object({ filename: z.string() })]).parse(JSON.parse(stdout.slice(stdout.indexOf('['))));
    // Whole or not at all.
    await rename(work, dir);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  const made = await packed();
  if (!made) throw new Error(`npm pack left no tarball in ${dir}`);
  return path.join(dir, made);
}
