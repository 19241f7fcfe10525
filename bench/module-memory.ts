// `npm run bench:memory`: where a process's memory goes before it serves anything. Imports the
// service's dependencies and then its own layers one after another in a fresh Node.js process (the
// production build, dist/), printing the resident set after each: what each costs on top of what
// came before. Run `npm run build` first. Prints; asserts nothing.
import { execFileSync } from 'node:child_process';
import path from 'node:path';

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
  ['the HTTP app (routers, contract, OpenAPI)', './dist/server/app.js'],
  ['the rest of the service (context, maintenance)', './dist/server/bootstrap.js'],
];

// Runs in the project root, so that bare specifiers resolve from its node_modules.
const probe = `
const row = (label) => { const m = process.memoryUsage(); console.log(JSON.stringify([label, m.rss, m.heapUsed])); };
row('node');
for (const [label, specifier] of ${JSON.stringify(STEPS)}) { await import(specifier); row(label); }
`;

const output = execFileSync(process.execPath, ['--input-type=module', '-e', probe], { cwd: ROOT, encoding: 'utf8' });
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
