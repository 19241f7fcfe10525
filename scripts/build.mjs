// `npm run build`: the contract package, then the service, compiled to dist/. Incremental: a build
// whose inputs are unchanged since the last one does nothing (so `npm start` on a built checkout
// starts at once), and no output is ever deleted (a running service loads them).
import console from 'node:console';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { buildContract, fingerprint, tsc } from '../contract/build.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stampFile = path.join(root, 'dist', '.build-stamp');

/** Every file under `dir` whose name `keep` accepts. */
function filesUnder(dir, keep) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && keep(entry.name))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/** What the service's build reads: its sources and the contract's, the compiler settings, the compiler. */
function inputs() {
  const ts = (name) => name.endsWith('.ts');
  return [
    ...filesUnder(path.join(root, 'server'), ts),
    ...readdirSync(path.join(root, 'contract'))
      .filter(ts)
      .map((name) => path.join(root, 'contract', name)),
    ...['tsconfig.json', 'tsconfig.build.json', 'package.json'].map((name) => path.join(root, name)),
    createRequire(import.meta.url).resolve('typescript/package.json'),
  ];
}

/** Builds what changed; returns whether anything was compiled. */
export async function build() {
  const contractBuilt = await buildContract();
  const stamp = fingerprint(inputs());
  const main = path.join(root, 'dist', 'server', 'main.js');
  if (!contractBuilt && existsSync(main) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp)
    return false;
  await tsc(['-p', path.join(root, 'tsconfig.build.json')]);
  writeFileSync(stampFile, stamp);
  return true;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await build().catch((error) => {
    console.error(error.message);
    process.exitCode = 1;
  });
}
