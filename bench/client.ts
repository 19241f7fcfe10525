// `npm run bench -- --client`: what the typed client costs a user beside openapi-fetch, in one run on
// this machine: type-check time and memory (tsc --extendedDiagnostics, best of 3), the shipped
// declarations and the browser bundle of the same consumer program. Ratios printed, nothing asserted;
// test/client-weight.test.ts asserts the sizes. See README "The typed client".
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  browserBundle,
  CONSUMERS,
  consumerProject,
  declarationBytes,
  typeCheck,
  type CheckCost,
  type Consumer,
} from '../test/support/consumer-projects.js';

const RUNS = 3;

async function bestOf(project: string, consumer: Consumer): Promise<CheckCost> {
  const costs: CheckCost[] = [];
  for (let run = 0; run < RUNS; run++) costs.push(await typeCheck(project, consumer));
  const least = (pick: (cost: CheckCost) => number) => Math.min(...costs.map(pick));
  return {
    checkSeconds: least((cost) => cost.checkSeconds),
    totalSeconds: least((cost) => cost.totalSeconds),
    memoryMB: least((cost) => cost.memoryMB),
    types: least((cost) => cost.types),
    instantiations: least((cost) => cost.instantiations),
  };
}

/** Measures both consumer programs and returns the table as text. */
export async function clientWeights(log: (message: string) => void): Promise<string> {
  const work = await mkdtemp(path.join(tmpdir(), 'task-bench-client-'));
  try {
    log('packing the client and installing it with openapi-fetch in a fresh project');
    const project = await consumerProject(work);
    const costs = new Map<Consumer, CheckCost>();
    const bundles = new Map<Consumer, number>();
    for (const consumer of CONSUMERS) {
      log(`tsc --noEmit --extendedDiagnostics × ${RUNS}, esbuild: ${consumer}`);
      costs.set(consumer, await bestOf(project, consumer));
      bundles.set(consumer, (await browserBundle(project, consumer)).gzipBytes);
    }
    const ours = costs.get('ours');
    const theirs = costs.get('openapi-fetch');
    if (!ours || !theirs) throw new Error('a consumer was not measured');
    const row = (name: string, a: number, b: number, format: (n: number) => string, target: string) =>
      `| ${name} | ${format(a)} | ${format(b)} | ${(a / b).toFixed(2)}× | ${target} |`;
    const seconds = (n: number) => `${n.toFixed(2)} s`;
    const whole = (n: number) => n.toLocaleString('en');
    return [
      '| measure (best of 3) | our client | openapi-fetch | ratio | target |',
      '|---|---|---|---|---|',
      row('tsc check time', ours.checkSeconds, theirs.checkSeconds, seconds, '≤ 1.5×'),
      row('tsc total time', ours.totalSeconds, theirs.totalSeconds, seconds, ''),
      row('tsc memory', ours.memoryMB, theirs.memoryMB, (n) => `${n.toFixed(0)} MB`, '≤ 1.5×'),
      row('types created', ours.types, theirs.types, whole, ''),
      row('instantiations', ours.instantiations, theirs.instantiations, whole, ''),
      row(
        'browser bundle (minified, gzip)',
        bundles.get('ours') ?? 0,
        bundles.get('openapi-fetch') ?? 0,
        (n) => `${(n / 1024).toFixed(1)} KB`,
        '≤ 8 KB',
      ),
      `| declaration files shipped | ${((await declarationBytes(project)) / 1024).toFixed(0)} KB | | | ≤ 1.5 MB |`,
    ].join('\n');
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
