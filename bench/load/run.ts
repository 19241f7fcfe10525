// The harness side of the load generator: one child process, started at the first job and kept for
// the run (a fork with tsx and autocannon to load took a second or more per row, most of a quick run).
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { firstMessage } from '../child.js';
import { LoadReplySchema, type LoadResult, type LoadSpec } from './spec.js';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

let generator: ChildProcess | undefined;
/** The job in progress: jobs run one after another, never two loads from one process at once. */
let queue: Promise<unknown> = Promise.resolve();

function started(): ChildProcess {
  if (generator && generator.exitCode === null && generator.signalCode === null) return generator;
  const child = fork(WORKER, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  generator = child;
  return child;
}

async function run(loads: LoadSpec[]): Promise<LoadResult[]> {
  const child = started();
  child.send(loads);
  const reply = LoadReplySchema.parse(await firstMessage(child, 'the load generator'));
  if (!reply.ok) throw new Error(`the load generator failed: ${reply.error}`);
  return reply.results;
}

/** Runs the loads at once and returns one result per load, in order. */
export function runLoads(loads: LoadSpec[]): Promise<LoadResult[]> {
  const result = queue.then(() => run(loads));
  queue = result.catch(() => undefined);
  return result;
}

/** Ends the load generator's process, if one runs. */
export async function stopLoadGenerator(): Promise<void> {
  const child = generator;
  generator = undefined;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.disconnect();
  await exited;
}
