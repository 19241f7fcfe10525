// Builds the package with the TypeScript compiler only: ES modules and CommonJS, and one set of
// declarations (beside the CommonJS files) that both formats use: the ES module entry points' .d.ts
// re-export it, so types are shipped once and `import` and `require` see the same ones.
// Incremental: nothing runs when no input changed since the last build, and no module in dist/ is
// ever deleted (a running service loads these files; tsc overwrites them in place).
import console from 'node:console';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, 'dist');
// Build state (the compiler's incremental files, the stamp) kept beside dist/, outside the package.
const state = path.join(here, '.tsbuild');
const stampFile = path.join(state, 'stamp');

/**
 * A fingerprint of the files a build reads (name, size, modification time) and of the compiler's
 * version: equal fingerprints mean an identical build.
 */
export function fingerprint(files) {
  const hash = createHash('sha256');
  for (const file of [...files].sort()) {
    const stats = statSync(file, { throwIfNoEntry: false });
    hash.update(`${file}\0${stats ? `${stats.size}\0${stats.mtimeMs}` : 'missing'}\n`);
  }
  return hash.digest('hex');
}

/** The contract's inputs: its sources, its compiler settings, this script and the compiler. */
function inputs() {
  const sources = readdirSync(here).filter(
    (name) => name.endsWith('.ts') || name.startsWith('tsconfig') || name === 'build.mjs' || name === 'package.json',
  );
  const typescript = createRequire(import.meta.url).resolve('typescript/package.json');
  return [...sources.map((name) => path.join(here, name)), typescript];
}

/** Writes a file only when its content differs, so an unchanged output keeps its time stamp. */
function writeIfChanged(file, content) {
  if (existsSync(file) && readFileSync(file, 'utf8') === content) return;
  writeFileSync(file, content);
}

/** The compilers running now, so that a signal to the build can stop them (see scripts/run.mjs). */
export const compilers = new Set();

/** Runs the TypeScript compiler with `args`; rejects when it fails. */
export function tsc(args) {
  const bin = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const child = spawn(process.execPath, [bin, ...args], { stdio: 'inherit' });
  compilers.add(child);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      compilers.delete(child);
      if (code === 0) resolve();
      else reject(new Error(`tsc ${args.join(' ')} failed (${signal ?? `exit code ${code}`})`));
    });
  });
}

/** The package's entry points (its `exports`), whose ES module declarations point at the CommonJS ones. */
const entries = ['index', 'validate'];

/**
 * Declarations under dist/esm other than the entry points' (left by a build that emitted a second
 * set): they would be packed as a second copy of the types. No module is loaded from them.
 */
function removeStaleEsmDeclarations(esm) {
  if (!existsSync(esm)) return;
  const keep = new Set(entries.map((entry) => path.join(esm, `${entry}.d.ts`)));
  for (const entry of readdirSync(esm, { recursive: true, withFileTypes: true })) {
    const file = path.join(entry.parentPath, entry.name);
    if (entry.isFile() && /\.d\.[cm]?ts(\.map)?$/.test(entry.name) && !keep.has(file)) rmSync(file);
  }
}

/** Builds dist/ unless its stamp says the inputs are unchanged; returns whether it built. */
export async function buildContract() {
  const stamp = fingerprint(inputs());
  const outputs = [path.join(dist, 'esm', 'index.js'), path.join(dist, 'cjs', 'index.js')];
  if (outputs.every((file) => existsSync(file)) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp)
    return false;
  for (const [config, format, flags] of [
    ['tsconfig.json', 'module', ['--declaration', 'false']],
    ['tsconfig.cjs.json', 'commonjs', []],
  ]) {
    const out = path.join(dist, format === 'module' ? 'esm' : 'cjs');
    await tsc([
      '-p',
      path.join(here, config),
      ...flags,
      '--incremental',
      '--tsBuildInfoFile',
      path.join(state, `${format}.tsbuildinfo`),
    ]);
    mkdirSync(out, { recursive: true });
    // Tells Node (and TypeScript) which module format the files below are in, and bundlers that they
    // may leave out any module whose exports are unused (the nearest package.json is the one read).
    writeIfChanged(path.join(out, 'package.json'), `${JSON.stringify({ type: format, sideEffects: false })}\n`);
  }
  removeStaleEsmDeclarations(path.join(dist, 'esm'));
  for (const entry of entries)
    writeIfChanged(path.join(dist, 'esm', `${entry}.d.ts`), `export * from '../cjs/${entry}.js';\n`);
  const cli = path.join(dist, 'esm', 'verify-cli.js');
  if (existsSync(cli)) chmodSync(cli, 0o755);
  mkdirSync(state, { recursive: true });
  writeFileSync(stampFile, stamp);
  return true;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await buildContract().catch((error) => {
    console.error(error.message);
    process.exitCode = 1;
  });
}
