// The client package as `npm pack --workspace contract` makes it, packed once for every test file
// that installs it (test/package.test.ts, test/client-weight.test.ts, test/doc-samples.test.ts) and
// kept until the package's files change: packing runs npm and the package's build each time.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rename, rm, stat } from 'node:fs/promises';
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

/** The path of the client's tarball (task-service-client-<version>.tgz), packed from this checkout. */
export async function packedClient(): Promise<string> {
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
    // Whole or not at all: a file packing at the same time may have put its own there first.
    await rename(work, dir).catch(() => undefined);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  const made = await packed();
  if (!made) throw new Error(`npm pack left no tarball in ${dir}`);
  return path.join(dir, made);
}
