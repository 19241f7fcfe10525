import { configDefaults, defineConfig } from 'vitest/config';

// The suite runs against the embedded PostgreSQL always, and against another PostgreSQL server too
// when TEST_DATABASE_URL names one (CI runs Debian's PostgreSQL 15 there; see .ci/run).
const postgres = process.env.TEST_DATABASE_URL;
// Project "pgbouncer" (CI): what a transaction pooler could break, with the service reaching
// TEST_DATABASE_URL's server through TEST_POOLER_URL (a PgBouncer in transaction mode, see .ci/run).
const pooler = postgres ? process.env.TEST_POOLER_URL : undefined;
// (changes and webhooks are left out until their timing-heavy tests pass there reliably.)
const POOLER_FILES = ['instances', 'event-stream', 'migrations', 'pooler'].map((name) => `test/${name}.test.ts`);
// `npm run test:stress`: process faults, sustained load and heavier fuzzing (test/stress, FUZZ_RUNS).
const stress = process.env.TEST_STRESS === '1';

const include = stress ? ['test/stress/**/*.test.ts', 'test/fuzz.test.ts'] : ['test/**/*.test.ts'];

// `@task-service/client` (contract/) from its sources, as tsc checks it, not from its build.
// Then Vite's server conditions, without "module": that one hands node the bundler-only builds of
// some packages (the AWS SDK's dist-es, with extensionless imports).
const sourceConditions = ['@task-service/source', 'node', 'development|production'];

export default defineConfig({
  ssr: { resolve: { conditions: sourceConditions } },
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    exclude: [...configDefaults.exclude, ...(stress ? [] : ['test/stress/**'])],
    // Each project names its files: a project's `include` would be added to the root's, not replace it.
    projects: [
      { extends: true, test: { name: 'embedded', include, env: { TEST_DB: 'embedded' } } },
      ...(postgres
        ? [{ extends: true as const, test: { name: 'postgres', include, env: { TEST_DB: 'postgres' } } }]
        : []),
      ...(pooler && !stress
        ? [
            {
              extends: true as const,
              test: { name: 'pgbouncer', include: POOLER_FILES, env: { TEST_DB: 'pgbouncer' } },
            },
          ]
        : []),
    ],
  },
});
