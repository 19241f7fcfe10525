import { defineConfig } from 'vitest/config';

// The suite runs against embedded PGlite always, and against PostgreSQL too when
// TEST_DATABASE_URL names a server (CI sets it; see .ci/run).
const postgres = process.env.TEST_DATABASE_URL;

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    projects: [
      { extends: true, test: { name: 'pglite', env: { TEST_DB: 'pglite' } } },
      ...(postgres ? [{ extends: true as const, test: { name: 'postgres', env: { TEST_DB: 'postgres' } } }] : []),
    ],
  },
});
