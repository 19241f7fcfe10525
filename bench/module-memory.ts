// `npm run bench:memory`: where a process's memory goes before it serves anything. Imports the
// service's dependencies and then its own layers one after another in a fresh Node.js process,
// printing the resident set after each: what each costs on top of what came before. The service's
// layers are bundled here as the build bundles them, with their packages left to node_modules, so
// that each package is counted once, in its own step. Prints; asserts nothing.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const ROOT = path.resolve(import.meta.dirname, '..');

/** In import order: a step's cost is what it adds to the steps above it. */
const STEPS: [label: string, specifier: string][] = [
  ['pg (the driver)', 'pg'],
  ['kysely (the query builder)', 'kysely'],
  ['jose (access tokens)', 'jose'],
  ['express', 'express'],
  ['zod and ts-rest', '@ts-rest/express'],
  ['@node-rs/argon2', '@node-rs/argon2'],
  ['pino', 'pino'],
  ['AWS SDK (S3 storage only)', '@aws-sdk/client-s3'],
  ['MCP SDK (the MCP endpoint)', '@modelcontextprotocol/sdk/server/mcp.js'],
  ['the HTTP app (routers, contract, OpenAPI)', 'app'],
  ['the rest of the service (context, maintenance)', 'bootstrap'],
];
const LAYERS = ['app', 'bootstrap'];

// Inside the project, so that the packages they import resolve from its node_modules.
mkdirSync(path.join(ROOT, 'dist'), { recursive: true });
const layers = mkdtempSync(path.join(ROOT, 'dist', 'memory-probe-'));
const bundleLayers = () =>
  build({
    entryPoints: Object.fromEntries(LAYERS.map((layer) => [layer, path.join(ROOT, 'server', `${layer}.ts`)])),
    outdir: layers,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    logLevel: 'warning',
  });
const specifier = (step: string) =>
  LAYERS.includes(step) ? pathToFileURL(path.join(layers, `${step}.js`)).href : step;

// Runs in the project root, so that bare specifiers resolve from its node_modules.
const probe = `
const row = (label) => { const m = process.memoryUsage(); console.log(JSON.stringify([label, m.rss, m.heapUsed])); };
row('node');
for (const [label, specifier] of ${JSON.stringify(STEPS.map(([label, step]) => [label, specifier(step)]))}) { await import(specifier); row(label); }
`;

let output: string;
try {
  await bundleLayers();
  output = execFileSync(process.execPath, ['--input-type=module', '-e', probe], { cwd: ROOT, encoding: 'utf8' });
} finally {
  rmSync(layers, { recursive: true, force: true });
}
const rows = output
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line) as [string, number, number]);
const mib = (bytes: number) => (bytes / 1048576).toFixed(0).padStart(5);
console.log('step                                              RSS MiB  +MiB  heap used MiB');
let previous = 0;
for (const [label, rss, heap] of rows) {
  console.log(`${label.padEnd(48)} ${mib(rss)} ${previous ? mib(rss - previous) : '     '}  ${mib(heap)}`);
  previous = rss;
}
