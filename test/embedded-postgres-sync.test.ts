// TEST_EMBEDDED_POSTGRES_NO_SYNC: the suite's service processes run their embedded PostgreSQL without
// syncs (initdb --no-sync, fsync off), which a kill -9 cannot tell apart (the kernel keeps what was
// written); outside the test suite it is refused, and without it the server syncs as it always has.
import { rm } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { loadConfig } from '../server/config.js';
import { runningServerUrl, startEmbeddedPostgres } from '../server/db/embedded-postgres.js';
import { readyDataDir } from './support/databases.js';
import { startServiceProcess } from './support/processes.js';

// Processes run their own embedded PostgreSQL; once per run is enough, whatever the project.
const once = process.env.TEST_DB === 'embedded';

async function fsyncOf(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ fsync: string }>('SHOW fsync')).rows[0]?.fsync;
  } finally {
    await client.end();
  }
}

describe('TEST_EMBEDDED_POSTGRES_NO_SYNC', () => {
  it('is off by default and refused outside NODE_ENV=test', () => {
    expect(loadConfig({}).embeddedPostgresNoSync).toBe(false);
    expect(() => loadConfig({ TEST_EMBEDDED_POSTGRES_NO_SYNC: 'true' })).toThrow(
      /TEST_EMBEDDED_POSTGRES_NO_SYNC is for the test suite only/,
    );
    expect(loadConfig({ TEST_EMBEDDED_POSTGRES_NO_SYNC: 'true', NODE_ENV: 'test' }).embeddedPostgresNoSync).toBe(true);
  });

  describe.runIf(once)('on the embedded server', () => {
    const made: string[] = [];
    afterAll(() => Promise.all(made.map((dir) => rm(dir, { recursive: true, force: true }))));

    it("turns fsync off for a service process's server, and a start without it turns fsync back on", async () => {
      const dataDir = await readyDataDir('task-service-no-sync-');
      made.push(dataDir);
      const service = await startServiceProcess({ DATA_DIR: dataDir, TEST_EMBEDDED_POSTGRES_NO_SYNC: 'true' });
      try {
        const url = await runningServerUrl(dataDir);
        if (!url) throw new Error('no embedded server runs');
        expect(await fsyncOf(url)).toBe('off');
      } finally {
        service.child.kill('SIGTERM');
        expect(await service.exited).toBe(0);
      }
      const server = await startEmbeddedPostgres(dataDir);
      try {
        expect(await fsyncOf(server.url)).toBe('on');
      } finally {
        await server.stop();
      }
    }, 120_000);
  });
});
