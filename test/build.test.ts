// Builds: `npm run build` (run by `npm start`, `migrate`, `create-admin`) is incremental
// and never deletes a file a running service may load.
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, statSync, watch } from 'node:fs';
import { utimes } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROOT } from './support/processes.js';

const run = promisify(execFile);
// The checkout's own build: once per run, whatever the project.
const oncePerRun = process.env.TEST_DB === 'embedded';

/** Every file of the builds with its modification time. */
function outputs(): Map<string, number> {
  const files = new Map<string, number>();
  for (const dir of ['dist', 'contract/dist']) {
    for (const entry of readdirSync(path.join(ROOT, dir), { recursive: true, withFileTypes: true })) {
      if (entry.isFile())
        files.set(path.join(entry.parentPath, entry.name), statSync(path.join(entry.parentPath, entry.name)).mtimeMs);
    }
  }
  return files;
}

describe.runIf(oncePerRun)('npm run build', () => {
  it('writes nothing when nothing changed since the last build', async () => {
    await run('npm', ['run', 'build', '--silent'], { cwd: ROOT });
    const before = outputs();
    await run('npm', ['run', 'build', '--silent'], { cwd: ROOT });
    expect(outputs()).toEqual(before);
  }, 300_000);

  it('after a change, rebuilds without ever deleting what a running service loads', async () => {
    await run('npm', ['run', 'build', '--silent'], { cwd: ROOT });
    const loaded = outputs();
    // A source changed (its time stamp is what a build sees): the build has work to do.
    const now = new Date();
    await utimes(path.join(ROOT, 'server', 'project-root.ts'), now, now);
    // Every name the build removes or replaces is reported (inotify), and checked at once: a file of
    // the last build found missing, even for a moment, is one a starting process could not load.
    const missing = new Set<string>();
    const watchers = ['dist', 'contract/dist'].map((dir) =>
      watch(path.join(ROOT, dir), { recursive: true }, (_event, name) => {
        const file = name === null ? undefined : path.join(ROOT, dir, name);
        if (file && loaded.has(file) && !existsSync(file)) missing.add(path.relative(ROOT, file));
      }),
    );
    const building = spawn('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'ignore' });
    const [code] = await once(building, 'exit');
    for (const watcher of watchers) watcher.close();
    expect(code).toBe(0);
    expect([...missing]).toEqual([]);
    // What processes run was the same after the change, and was left alone: a file being rewritten
    // in place is a truncated module to a process that starts or loads a chunk at that moment.
    const bundle = path.join(ROOT, 'dist', 'bundle');
    const rewritten = [...outputs()]
      .filter(([file, modified]) => file.startsWith(bundle) && loaded.get(file) !== modified)
      .map(([file]) => path.relative(ROOT, file));
    expect(rewritten).toEqual([]);
  }, 300_000);
});
