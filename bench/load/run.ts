// The harness side of the load generator: one child process per job.
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { firstMessage } from '../child.js';
import { LoadReplySchema, type LoadResult, type LoadSpec } from './spec.js';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

/** Runs the loads at once from a fresh process and returns one result per load, in order. */
export async function runLoads(loads: LoadSpec[]): Promise<LoadResult[]> {
  const child = fork(WORKER, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = once(child, 'exit');
  child.send(loads);
  const message = await firstMessage(child, 'the load generator');
  await exited;
  const reply = LoadReplySchema.parse(message);
  if (!reply.ok) throw new Error(`the load generator failed: ${reply.error}`);
  return reply.results;
}

export async function runLoad(load: LoadSpec): Promise<LoadResult> {
  const [result] = await runLoads([load]);
  if (!result) throw new Error('the load generator returned no result');
  return result;
}
