import { execFile } from 'node:child_process';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { prepareReadyDataDir, prepareTemplates, removeReadyDataDir, removeTemplates } from './databases.js';

// Vitest calls global setup for the root and again for each project, in one process: the
// templates are built once and shared, and so is the build.
declare global {
  var taskServiceTemplates: Promise<void> | undefined;
  var taskServiceBuild: Promise<unknown> | undefined;
  var taskServiceReadyDataDir: Promise<void> | undefined;
  var taskServiceSetups: number | undefined;
}

const ROOT = path.resolve(import.meta.dirname, '..', '..');

export default async function setup(): Promise<() => Promise<void>> {
  globalThis.taskServiceSetups = (globalThis.taskServiceSetups ?? 0) + 1;
  // The service processes tests spawn run the build (dist/), as `npm start` does: it is brought up
  // to date with the sources first (incremental: nothing is compiled when nothing changed).
  globalThis.taskServiceBuild ??= promisify(execFile)(process.execPath, ['scripts/build.mjs'], { cwd: ROOT });
  globalThis.taskServiceTemplates ??= prepareTemplates();
  // Made by the built `migrate` command, so it waits for the build.
  globalThis.taskServiceReadyDataDir ??= globalThis.taskServiceBuild.then(prepareReadyDataDir);
  await Promise.all([globalThis.taskServiceBuild, globalThis.taskServiceTemplates, globalThis.taskServiceReadyDataDir]);
  return async () => {
    await Promise.all([removeTemplates(), removeReadyDataDir()]);
    // The run's temporary directory in memory (vitest.config.ts), once every project is done with it.
    const runTmp = process.env.TEST_RUN_TMPDIR;
    globalThis.taskServiceSetups = (globalThis.taskServiceSetups ?? 1) - 1;
    if (runTmp && globalThis.taskServiceSetups === 0) await rm(runTmp, { recursive: true, force: true });
  };
}
