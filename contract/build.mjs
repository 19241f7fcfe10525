// Builds the package with the TypeScript compiler only: ES modules and CommonJS, each with its
// .d.ts, so `import` and `require` both get code and types of their own module format.
// Incremental: nothing runs when no input changed since the last build, and nothing in dist/ is
// ever deleted (a running service loads these files; tsc overwrites them in place).
import console from 'node:console';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
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
  const sources = readdirSync(here).filter((name) => name.endsWith('.ts') || name.startsWith('tsconfig') || name === 'build.mjs' || name === 'package.json');
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

/** Builds dist/ unless its stamp says the inputs are unchanged; returns whether it built. */
export async function buildContract() {
  const stamp = fingerprint(inputs());
  const outputs = [path.join(dist, 'esm', 'index.js'), path.join(dist, 'cjs', 'index.js')];
  if (outputs.every((file) => existsSync(file)) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return false;
  for (const [config, format] of [['tsconfig.json', 'module'], ['tsconfig.cjs.json', 'commonjs']]) {
    const out = path.join(dist, format === 'module' ? 'esm' : 'cjs');
    await tsc(['-p', path.join(here, config), '--incremental', '--tsBuildInfoFile', path.join(state, `${format}.tsbuildinfo`)]);
    mkdirSync(out, { recursive: true });
    // Tells Node (and TypeScript) which module format the files below are in.
    writeIfChanged(path.join(out, 'package.json'), `${JSON.stringify({ type: format })}\n`);
  }
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
