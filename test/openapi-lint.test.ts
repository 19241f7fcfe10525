// `npm run lint:openapi` (Spectral's OWASP ruleset over the OpenAPI document, .spectral.yaml says
// why each rule is kept or turned off) as a file of the suite: `npm test` runs it beside the other
// files rather than before all of them.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ROOT } from './support/processes.js';

// The document is the same whatever the database: once per run.
const oncePerRun = process.env.TEST_DB === 'embedded';

describe.runIf(oncePerRun)('npm run lint:openapi', () => {
  it('finds nothing of severity warn or above in the OpenAPI document', async () => {
    const result = await promisify(execFile)('npm', ['run', 'lint:openapi', '--silent'], { cwd: ROOT }).catch(
      (error: unknown) => {
        const output = z.object({ stdout: z.string(), stderr: z.string() }).safeParse(error);
        throw new Error(
          `lint:openapi failed:\n${output.success ? output.data.stdout + output.data.stderr : String(error)}`,
        );
      },
    );
    expect(result.stdout).toContain("No results with a severity of 'warn' or higher found!");
  }, 120_000);
});
