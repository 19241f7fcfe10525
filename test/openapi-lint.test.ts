// `npm run lint:openapi` (Spectral's OWASP ruleset over the OpenAPI document, .spectral.yaml says
// why each rule is kept or turned off) as a file of the suite: `npm test` runs it beside the other
// files rather than before all of them. The document is built here by the function the script's
// first step calls (this worker has the service's modules loaded already), and checked by the
// script's own Spectral command, read from package.json.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildOpenApiDocument } from '../server/openapi/document.js';
import { ROOT } from './support/processes.js';
import { bash } from './support/shell.js';

// The document is the same whatever the database: once per run.
const oncePerRun = process.env.TEST_DB === 'embedded';

const PackageSchema = z.object({ scripts: z.object({ 'lint:openapi': z.string() }) });

describe.runIf(oncePerRun)('npm run lint:openapi', () => {
  it('finds nothing of severity warn or above in the OpenAPI document', async () => {
    const { scripts } = PackageSchema.parse(JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')));
    // The script's two steps: `npm run openapi` (buildOpenApiDocument) to a file, Spectral over it.
    const steps = /^node scripts\/run\.mjs server\/cli\/openapi (\S+) && (spectral lint .*)$/.exec(
      scripts['lint:openapi'],
    );
    expect(steps, scripts['lint:openapi']).not.toBeNull();
    const [, written = '', spectral = ''] = steps ?? [];
    const work = await mkdtemp(path.join(tmpdir(), 'task-service-openapi-lint-'));
    try {
      const document = path.join(work, 'openapi.json');
      await writeFile(document, `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`);
      // The script's Spectral command as npm runs it (node_modules/.bin first on the PATH), on this copy.
      const command = spectral.split(written).join(document);
      const result = await bash(
        command,
        ROOT,
        { PATH: `${path.join(ROOT, 'node_modules', '.bin')}:${process.env.PATH ?? ''}` },
        120_000,
      );
      expect(result.stdout + result.stderr, command).toContain("No results with a severity of 'warn' or higher found!");
      expect(result.code, result.stdout + result.stderr).toBe(0);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }, 120_000);
});
