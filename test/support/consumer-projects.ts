// The client's weight as a user pays it, beside openapi-fetch's: the package packed and installed into
// a fresh strict project (skipLibCheck: false, a browser app's libraries), where the same consumer
// program (test/support/consumers/) is type-checked and bundled for each. Used by
// test/client-weight.test.ts (sizes and type-level assertions) and `npm run bench -- --client` (timings).
import { execFile } from 'node:child_process';
import { copyFile, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { z } from 'zod';
import { buildOpenApiDocument } from '../../server/openapi/document.js';
import { packedClient } from './packed-client.js';

const run = promisify(execFile);
const require = createRequire(import.meta.url);
const tsc = require.resolve('typescript/bin/tsc');
const npm = (args: string[], cwd: string) =>
  run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, maxBuffer: 64 << 20 });

export const CONSUMERS = ['ours', 'openapi-fetch'] as const;
export type Consumer = (typeof CONSUMERS)[number];

const compilerOptions = {
  target: 'ES2022',
  module: 'ESNext',
  moduleResolution: 'Bundler',
  lib: ['ES2023', 'DOM', 'DOM.Iterable'],
  types: [],
  strict: true,
  exactOptionalPropertyTypes: true,
  noUncheckedIndexedAccess: true,
  skipLibCheck: false,
  noEmit: true,
};

/** Installs the packed client with openapi-fetch into a fresh project in `work`. */
export async function consumerProject(work: string): Promise<string> {
  const tarball = await packedClient();
  const project = path.join(work, 'consumer');
  await mkdir(path.join(project, 'src'), { recursive: true });
  await writeFile(
    path.join(project, 'package.json'),
    JSON.stringify({ name: 'consumer', private: true, type: 'module' }),
  );
  const openapiFetch = z.object({ version: z.string() }).parse(require('openapi-fetch/package.json')).version;
  await npm(['install', '--prefer-offline', tarball, `openapi-fetch@${openapiFetch}`], project);
  // openapi-typescript's types from our own document (fields with defaults optional in requests).
  const document = path.join(project, 'openapi.json');
  await writeFile(document, JSON.stringify(buildOpenApiDocument()));
  const openapiTypescript = path.join(
    path.dirname(require.resolve('openapi-typescript/package.json')),
    'bin',
    'cli.js',
  );
  await run(process.execPath, [
    openapiTypescript,
    document,
    '--default-non-nullable=false',
    '-o',
    path.join(project, 'src', 'schema.d.ts'),
  ]);
  for (const consumer of CONSUMERS) {
    await copyFile(
      path.join(import.meta.dirname, 'consumers', `${consumer}.ts`),
      path.join(project, 'src', `${consumer}.ts`),
    );
    const files = consumer === 'ours' ? ['src/ours.ts'] : ['src/openapi-fetch.ts', 'src/schema.d.ts'];
    await writeFile(path.join(project, `tsconfig.${consumer}.json`), JSON.stringify({ compilerOptions, files }));
  }
  return project;
}

export interface CheckCost {
  checkSeconds: number;
  totalSeconds: number;
  memoryMB: number;
  types: number;
  instantiations: number;
}

/** `tsc --noEmit --extendedDiagnostics` of one consumer program; throws with tsc's output on a type error. */
export async function typeCheck(project: string, consumer: Consumer): Promise<CheckCost> {
  // GC on the main thread only: its concurrent marking otherwise finishes later on a busy machine,
  // and "Memory used" (the heap at the end, garbage included) would measure the machine's load.
  const args = ['--single-threaded-gc', tsc, '-p', `tsconfig.${consumer}.json`, '--extendedDiagnostics'];
  const { stdout } = await run(process.execPath, args, {
    cwd: project,
  }).catch((error: unknown) => {
    const output = z.object({ stdout: z.string() }).safeParse(error);
    throw new Error(`tsc failed for the ${consumer} consumer:\n${output.success ? output.data.stdout : String(error)}`);
  });
  const figure = (label: string) => {
    const match = new RegExp(`^${label}:\\s+([\\d.]+)`, 'm').exec(stdout);
    if (!match?.[1]) throw new Error(`no "${label}" in tsc's diagnostics:\n${stdout}`);
    return Number(match[1]);
  };
  return {
    checkSeconds: figure('Check time'),
    totalSeconds: figure('Total time'),
    memoryMB: figure('Memory used') / 1024,
    types: figure('Types'),
    instantiations: figure('Instantiations'),
  };
}

export interface BundleWeight {
  minifiedBytes: number;
  gzipBytes: number;
  /** Every file with code in the bundle, relative to the project (not those tree-shaken away). */
  inputs: string[];
}

/** esbuild's minified browser bundle of one consumer program, and its gzip size. */
export async function browserBundle(project: string, consumer: Consumer): Promise<BundleWeight> {
  const result = await build({
    entryPoints: [path.join(project, 'src', `${consumer}.ts`)],
    absWorkingDir: project,
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  const [output] = result.outputFiles;
  if (!output) throw new Error('esbuild wrote nothing');
  const written = Object.values(result.metafile.outputs)[0]?.inputs ?? {};
  const inputs = Object.entries(written).flatMap(([input, { bytesInOutput }]) => (bytesInOutput > 0 ? [input] : []));
  return { minifiedBytes: output.contents.byteLength, gzipBytes: gzipSync(output.contents).byteLength, inputs };
}

/** The bytes of every declaration file the installed client ships. */
export async function declarationBytes(project: string): Promise<number> {
  const dir = path.join(project, 'node_modules', '@task-service', 'client');
  let total = 0;
  for (const entry of await readdir(dir, { recursive: true })) {
    if (/\.d\.[cm]?ts$/.test(entry) && !entry.startsWith('node_modules'))
      total += (await stat(path.join(dir, entry))).size;
  }
  return total;
}

export const readConsumer = (consumer: Consumer) =>
  readFile(path.join(import.meta.dirname, 'consumers', `${consumer}.ts`), 'utf8');
