// Builds the package with the TypeScript compiler only: ES modules and CommonJS, each with its
// .d.ts, so `import` and `require` both get code and types of their own module format.
import { execFileSync } from 'node:child_process';
import process from 'node:process';
import { chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const dist = path.join(here, 'dist');

rmSync(dist, { recursive: true, force: true });
for (const [config, format] of [['tsconfig.json', 'module'], ['tsconfig.cjs.json', 'commonjs']]) {
  execFileSync(process.execPath, [tsc, '-p', path.join(here, config)], { stdio: 'inherit' });
  const out = path.join(dist, format === 'module' ? 'esm' : 'cjs');
  mkdirSync(out, { recursive: true });
  // Tells Node (and TypeScript) which module format the files below are in.
  writeFileSync(path.join(out, 'package.json'), `${JSON.stringify({ type: format })}\n`);
}
const cli = path.join(dist, 'esm', 'verify-cli.js');
if (existsSync(cli)) chmodSync(cli, 0o755);
