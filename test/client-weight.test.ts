import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routesSource } from '../contract/tools/routes-source.js';
import {
  browserBundle,
  consumerProject,
  declarationBytes,
  typeCheck,
  type CheckCost,
} from './support/consumer-projects.js';
import { serviceForFile } from './support/app.js';
import { uniqueEmail } from './support/users.js';

// What the client costs the people who use it, held to its targets beside openapi-fetch (docs/client.md): the
// same consumer program (test/support/consumers/) written for each, in a fresh strict project where
// the packed client is installed. Sizes and type-level assertions here; timings in
// `npm run bench -- --client` (a shared CPU makes them too noisy to assert).
const KB = 1024;
const served = serviceForFile({}, { listen: true });

let work: string;
let project: string;
beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'task-service-weight-'));
  project = await consumerProject(work);
}, 300_000);
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

describe("the client's weight beside openapi-fetch's", () => {
  it('ships one set of declarations, at most 1.5 MB, naming the contract types instead of spelling schemas out', async () => {
    expect(await declarationBytes(project)).toBeLessThanOrEqual(1.5 * KB * KB);
    const dist = path.join(project, 'node_modules', '@task-service', 'client', 'dist');
    // The ES module entry points re-export the CommonJS declarations.
    const esmDeclarations = (await readdir(path.join(dist, 'esm'))).filter((file) => file.endsWith('.d.ts')).sort();
    expect(esmDeclarations).toEqual(['index.d.ts', 'validate.d.ts']);
    expect(await readFile(path.join(dist, 'esm', 'index.d.ts'), 'utf8')).toBe("export * from '../cjs/index.js';\n");
    const tasks = await readFile(path.join(dist, 'cjs', 'tasks.d.ts'), 'utf8');
    expect(tasks.split('validation_failed').length - 1, 'problem codes spelled out in tasks.d.ts').toBe(0);
  });

  it(
    'type-checks both programs with their type assertions (strict, skipLibCheck: false), in as much memory and work as openapi-fetch at most 1.5 times over',
    { timeout: 600_000 },
    async () => {
      const ours: CheckCost = await typeCheck(project, 'ours');
      const theirs: CheckCost = await typeCheck(project, 'openapi-fetch');
      expect(ours.memoryMB / theirs.memoryMB).toBeLessThanOrEqual(1.5);
      expect(ours.instantiations / theirs.instantiations).toBeLessThanOrEqual(1.5);
    },
  );

  it('bundles for a browser in at most 8 KB gzip, with nothing of zod, ts-rest, the server or Node', async () => {
    const bundle = await browserBundle(project, 'ours');
    expect(bundle.inputs.filter((input) => /zod|@ts-rest|\/server\/|^node:/.test(input))).toEqual([]);
    expect(bundle.gzipBytes).toBeLessThanOrEqual(8 * KB);
  });

  it('runs both programs against the service with the same outcome', { timeout: 120_000 }, async () => {
    const logs = new Map<string, string[]>();
    for (const consumer of ['ours', 'openapi-fetch'] as const) {
      const email = uniqueEmail(`weight-${consumer}`);
      const password = 'a long enough password';
      const registered = await fetch(`${served.baseUrl}/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password, name: consumer }),
      });
      expect(registered.status).toBe(201);
      const outfile = path.join(project, 'out', `${consumer}.mjs`);
      await build({
        entryPoints: [path.join(project, 'src', `${consumer}.ts`)],
        absWorkingDir: project,
        bundle: true,
        format: 'esm',
        platform: 'node',
        outfile,
        logLevel: 'silent',
      });
      const program: unknown = await import(outfile);
      if (typeof program !== 'object' || program === null || !('run' in program) || typeof program.run !== 'function')
        throw new Error(`${consumer} exports no run()`);
      const log: unknown = await program.run(served.baseUrl, email, password);
      expect(Array.isArray(log)).toBe(true);
      logs.set(consumer, Array.isArray(log) ? log.map(String) : []);
    }
    for (const [consumer, log] of logs) {
      expect(log, consumer).toContain(`hello ${consumer}`);
      expect(log, consumer).toContain('Write the report (high)');
      expect(log, consumer).toContain('412 precondition_failed');
      expect(log, consumer).toContain('1 task(s) on 1 page(s)');
      expect(
        log.some((line) => line.startsWith('404 not_found ')),
        consumer,
      ).toBe(true);
    }
  });

  it('routes.ts is what `npm run routes` writes from the contract now', async () => {
    expect(await readFile(path.join(import.meta.dirname, '..', 'contract', 'routes.ts'), 'utf8')).toBe(routesSource());
  });
});
