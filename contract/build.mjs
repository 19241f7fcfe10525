// Builds the package with the TypeScript compiler only: ES modules and CommonJS, and one set of
// declarations (beside the CommonJS files) that both formats use: the ES module entry points' .d.ts
// re-export it, so types are shipped once and `import` and `require` see the same ones.
import { execFileSync } from 'node:child_process';
import process from 'node:process';
import { chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const dist = path.join(here, 'dist');
/** The package's entry points (its `exports`), whose ES module declarations point at the CommonJS ones. */
const entries = ['index', 'validate'];

rmSync(dist, { recursive: true, force: true });
for (const [config, format, flags] of [
  ['tsconfig.json', 'module', ['--declaration', 'false']],
  ['tsconfig.cjs.json', 'commonjs', []],
]) {
  execFileSync(process.execPath, [tsc, '-p', path.join(here, config), ...flags], { stdio: 'inherit' });
  const out = path.join(dist, format === 'module' ? 'esm' : 'cjs');
  mkdirSync(out, { recursive: true });
  // Tells Node (and TypeScript) which module format the files below are in, and bundlers that they
  // may leave out any module whose exports are unused (the nearest package.json is the one read).
  writeFileSync(path.join(out, 'package.json'), `${JSON.stringify({ type: format, sideEffects: false })}\n`);
}
for (const entry of entries) writeFileSync(path.join(dist, 'esm', `${entry}.d.ts`), `export * from '../cjs/${entry}.js';\n`);
const cli = path.join(dist, 'esm', 'verify-cli.js');
if (existsSync(cli)) chmodSync(cli, 0o755);
