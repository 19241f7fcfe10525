// Starts a baseline server (a file in this folder) in a child process.
import { fork } from 'node:child_process';
import path from 'node:path';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { firstMessage } from '../child.js';
import { ListeningSchema } from './listen.js';

export interface RunningBaseline {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

export async function startBaseline(
  file: 'runtime-server.ts' | 'stack-server.ts',
  env: Record<string, string> = {},
): Promise<RunningBaseline> {
  const script = fileURLToPath(new URL(`./${file}`, import.meta.url));
  // BENCH_CPU_PROF=DIR: a CPU profile of the baseline too, beside the service's (bench/service.ts).
  const profile = process.env.BENCH_CPU_PROF
    ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROF)}`]
    : [];
  const child = fork(script, [], {
    execArgv: ['--import', 'tsx', ...profile],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const { port } = ListeningSchema.parse(await firstMessage(child, `baseline ${file}`));
  if (child.pid === undefined) throw new Error(`baseline ${file} has no process id`);
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.disconnect();
      await exited;
    },
  };
}
