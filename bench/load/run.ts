// The harness side of the load generator: child processes, started at the first job and kept for
// the run (a fork with tsx and autocannon to load took a second or more per row, most of a quick
// run). Loads that run at once (a login storm and its /healthz probe) each get a process of their
// own: a probe sharing the storm's event loop timed that loop's delays, up to hundreds of
// milliseconds, as the service's.
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { firstMessage } from '../child.js';
import { LoadReplySchema, type LoadResult, type LoadSpec } from './spec.js';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

const generators: ChildProcess[] = [];
/** The job in progress: jobs run one after another, never two loads from one process at once. */
let queue: Promise<unknown> = Promise.resolve();

/** The generator for the job's `index`th load, started if it is not running. */
function generator(index: number): ChildProcess {
  const running = generators[index];
  if (running && running.exitCode === null && running.signalCode === null) return running;
  const child = fork(WORKER, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  generators[index] = child;
  return child;
}

async function runOne(child: ChildProcess, load: LoadSpec): Promise<LoadResult> {
  const answered = firstMessage(child, 'the load generator');
  child.send(load);
  const reply = LoadReplySchema.parse(await answered);
  if (!reply.ok) throw new Error(`the load generator failed: ${reply.error}`);
  return reply.result;
}

/** Runs the loads at once, each from its own process, and returns one result per load, in order. */
export function runLoads(loads: LoadSpec[]): Promise<LoadResult[]> {
  const result = queue.then(() => Promise.all(loads.map((load, index) => runOne(generator(index), load))));
  queue = result.catch(() => undefined);
  return result;
}

/** Ends the load generators' processes. */
export async function stopLoadGenerator(): Promise<void> {
  const children = generators.splice(0);
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.disconnect();
      await exited;
    }),
  );
}
