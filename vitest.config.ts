import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statfsSync } from 'node:fs';
import path from 'node:path';
import { configDefaults, defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { isAlive } from './test/support/process-tree.js';

// The suite runs against the embedded PostgreSQL always, and against another PostgreSQL server too
// when TEST_DATABASE_URL names one (CI runs Debian's PostgreSQL 15 there; see .ci/run).
const postgres = process.env.TEST_DATABASE_URL;
// Project "pgbouncer" (CI): what a transaction pooler could break, with the service reaching
// TEST_DATABASE_URL's server through TEST_POOLER_URL (a PgBouncer in transaction mode, see .ci/run).
const pooler = postgres ? process.env.TEST_POOLER_URL : undefined;
// The files whose subject a pooler changes. The changes feed and webhooks poll the same way with or
// without one, and their timing-heavy tests run on the two other servers.
const POOLER_FILES = ['instances', 'event-stream', 'migrations', 'pooler'].map((name) => `test/${name}.test.ts`);
// `npm run test:stress`: process faults, sustained load and heavier fuzzing (test/stress, FUZZ_RUNS).
const stress = process.env.TEST_STRESS === '1';

// Tests make PostgreSQL clusters, copies of them, databases and attachments: files by the thousand,
// each of which costs about a millisecond of system time on a disk's filesystem and a tenth of that
// in memory. So the run's temporary files (TMPDIR, which node, PostgreSQL's tools and every process
// the tests start follow) go to a directory of its own on /dev/shm when the machine has one with room,
// removed after the run (test/support/global-setup.ts), or by the next run when this one was killed
// (the directory's name holds the run's PID). An explicit TMPDIR is left as it is.
const RAM_DIR = '/dev/shm';
const RAM_NEEDED_BYTES = 4 * 1024 ** 3;
function ramBacked(): boolean {
  if (!existsSync(RAM_DIR)) return false;
  const { bavail, bsize } = statfsSync(RAM_DIR);
  return bavail * bsize >= RAM_NEEDED_BYTES;
}
const RUN_DIR_PREFIX = 'task-service-test-';
/** The directories of runs whose process is gone (killed, say): memory that nothing would free. */
function removeAbandonedRunDirs(): void {
  for (const name of readdirSync(RAM_DIR)) {
    const pid = Number(new RegExp(`^${RUN_DIR_PREFIX}(\\d+)-`).exec(name)?.[1] ?? 0);
    if (pid > 0 && pid !== process.pid && !isAlive(pid))
      rmSync(path.join(RAM_DIR, name), { recursive: true, force: true });
  }
}
if (!process.env.TMPDIR && ramBacked()) {
  removeAbandonedRunDirs();
  const dir = mkdtempSync(path.join(RAM_DIR, `${RUN_DIR_PREFIX}${process.pid}-`));
  // PostgreSQL runs as its own account when tests run as root: it must reach the clusters below.
  chmodSync(dir, 0o711);
  process.env.TMPDIR = dir;
  process.env.TEST_RUN_TMPDIR = dir;
}

// What every test file and every service it starts runs with: password hashing at a test-only cost
// (0.5 ms a hash instead of 16; the configuration refuses it outside NODE_ENV=test), and an embedded
// PostgreSQL that never waits on the disk (initdb --no-sync, fsync off: a kill loses nothing either
// way, and syncs cost seconds a start on a busy machine). A test that needs the real thing sets it.
const testEnv = { ARGON2_MEMORY_KIB: '64', ARGON2_TIME_COST: '1', TEST_EMBEDDED_POSTGRES_NO_SYNC: 'true' };

// Files that keep a core busy for most of their run (compiling, bundling, packing, fuzzing, loads of
// parallel writes): at most two of them at once, in a pool of their own, beside the files that mostly
// wait (on child processes, servers, timers), which run five at a time even on two cores.
const CPU_FILES = ['build', 'client-weight', 'code-samples', 'fuzz', 'package', 'races', 'write-faults'].map(
  (name) => `test/${name}.test.ts`,
);
const maxWaiting = Number(process.env.TEST_MAX_WORKERS ?? 5);
const maxCpu = 2;
// A server per worker (test/support/databases.ts says why); global setup reads these.
process.env.TEST_SERVERS = String(maxWaiting + maxCpu);
process.env.TEST_WAITING_WORKERS = String(maxWaiting);

const include = stress ? ['test/stress/**/*.test.ts', 'test/fuzz.test.ts'] : ['test/**/*.test.ts'];

// `@task-service/client` (contract/) from its sources, as tsc checks it, not from its build.
// Then Vite's server conditions, without "module": that one hands node the bundler-only builds of
// some packages (the AWS SDK's dist-es, with extensionless imports).
const sourceConditions = ['@task-service/source', 'node', 'development|production'];

// A worker of the waiting pool runs its files one after another in one process and one module graph
// (isolate off, in the project and in the pool: Vitest starts a process per file unless the root's
// poolOptions.forks says otherwise), so the service's modules load once per worker, not once per
// file (about 1.4 s of CPU a file). These files change modules for the files after them (vi.mock, an
// environment variable read at import): a fresh graph each, in the threads pool, which isolates.
const ISOLATED_FILES = ['attachments', 'attachments-s3'].map((name) => `test/${name}.test.ts`);

/**
 * A database's projects: its waiting files in the forks pool, the isolated ones and (`cpu`) its
 * CPU files in the threads pool.
 */
function projectsOn(name: string, files: string[], cpu: boolean): TestProjectInlineConfiguration[] {
  const env = { ...testEnv, TEST_DB: name, TEST_POOL: 'waiting' };
  const exclude = [...configDefaults.exclude, ...excluded, ...(cpu ? CPU_FILES : [])];
  const globbed = files.some((file) => file.includes('*'));
  const isolated = globbed ? ISOLATED_FILES : files.filter((file) => ISOLATED_FILES.includes(file));
  return [
    { extends: true, test: { name, include: files, exclude: [...exclude, ...ISOLATED_FILES], env, isolate: false } },
    ...(isolated.length > 0
      ? [
          {
            extends: true as const,
            test: {
              name: `${name} (isolated)`,
              include: isolated,
              exclude,
              pool: 'threads' as const,
              env: { ...env, TEST_POOL: 'cpu' },
            },
          },
        ]
      : []),
    ...(cpu
      ? [
          {
            extends: true as const,
            test: {
              name: `${name} (cpu)`,
              include: CPU_FILES,
              pool: 'threads' as const,
              env: { ...env, TEST_POOL: 'cpu' },
            },
          },
        ]
      : []),
  ];
}

const excluded = stress ? [] : ['test/stress/**'];

// The files that take longest (the processes they start and wait on, the client's builds), longest
// first as a run on two cores measured them: started first, so that the run never ends waiting on
// one that started last. Vitest orders the rest (longest first from its record of the last run, else
// largest file first; a fresh checkout has no record, and these files are not the largest).
const LONGEST = [
  'backup',
  'backup-interrupted',
  'process',
  'package',
  'fuzz',
  'verify',
  'doc-samples',
  'client-weight',
  'races',
  'code-samples',
  'signals',
  'build',
  'webhook-delivery-limits',
  'write-faults',
  'admin',
  'project-tasks',
  'webhooks',
  'migrations',
  'project-members',
  'connections',
  'mcp',
  'logging',
  'openapi',
  'quotas',
  'client-events',
  'users',
  'oauth',
  'tokens',
  'instances',
  'attachments',
  'projects',
  'event-stream-limits',
  'attachments-s3',
  'openapi-lint',
].map((name) => `test/${name}.test.ts`);

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (spec: TestSpecification) => {
      const index = LONGEST.indexOf(path.relative(import.meta.dirname, spec.moduleId));
      return index < 0 ? LONGEST.length : index;
    };
    const sorted = await super.sort(files);
    // Stable: the rest keep Vitest's order.
    return sorted
      .map((spec, index) => ({ spec, index }))
      .sort((a, b) => rank(a.spec) - rank(b.spec) || a.index - b.index)
      .map(({ spec }) => spec);
  }
}

export default defineConfig({
  ssr: { resolve: { conditions: sourceConditions } },
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // What a test polls for (a delivery, an event) comes within a second on an idle machine; files
    // run side by side on two cores can take several. A poll that holds returns at once all the same.
    expect: { poll: { timeout: 10_000 } },
    sequence: { sequencer: LongestFirst },
    pool: 'forks',
    poolOptions: {
      // The pool's processes run file after file; Vitest still starts fresh ones between projects.
      forks: { maxForks: maxWaiting, minForks: maxWaiting, isolate: false },
      threads: { maxThreads: maxCpu, minThreads: 1 },
    },
    exclude: [...configDefaults.exclude, ...excluded],
    // Each project names its files: a project's `include` would be added to the root's, not replace it.
    projects: [
      ...projectsOn('embedded', include, !stress),
      ...(postgres ? projectsOn('postgres', include, !stress) : []),
      ...(pooler && !stress ? projectsOn('pgbouncer', POOLER_FILES, false) : []),
    ],
  },
});
