// Nothing the project runs calls a host of its own accord: Prisma's CLI (run by npm install's
// postinstall and by the migration scripts) asks Prisma's
// update-check host unless CHECKPOINT_DISABLE is set, which prisma.config.ts does for every run.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

// `prisma validate` writes nothing: `generate` would rewrite the generated client that test files
// running beside this one import. Once a run: it checks the checkout, not a database.
describe.runIf(process.env.TEST_DB === 'embedded')("Prisma's CLI", () => {
  it(
    'never runs its update check here, even when the caller did not set CHECKPOINT_DISABLE',
    { timeout: 60_000 },
    async () => {
      const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'CHECKPOINT_DISABLE'));
      const { stderr } = await promisify(execFile)('npx', ['--no-install', 'prisma', 'validate'], {
        cwd: path.resolve(import.meta.dirname, '..'),
        env: { ...env, DEBUG: 'prisma:cli:checkpoint' },
      });
      expect(stderr).toContain('disabled by the CHECKPOINT_DISABLE env var');
      expect(stderr).not.toContain('checkpoint.check');
    },
  );
});
