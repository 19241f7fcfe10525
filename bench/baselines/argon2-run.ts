// Runs the argon2 baseline (argon2.ts) in a child process of its own.
import { fork } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { firstMessage } from '../child.js';

export const Argon2ResultSchema = z.object({
  concurrency: z.number(),
  hashesPerSecond: z.number().nullable(),
  verifiesPerSecond: z.number(),
});
export type Argon2Result = z.infer<typeof Argon2ResultSchema>;

/** Verifications (and, with `withHashes`, hashes) per second over `seconds` each. */
export async function measureArgon2(seconds: number, withHashes: boolean): Promise<Argon2Result> {
  const script = fileURLToPath(new URL('./argon2.ts', import.meta.url));
  // libuv's pool (4 threads by default) runs the verifications: at least one thread per core.
  const env = { ...process.env, UV_THREADPOOL_SIZE: String(Math.max(4, availableParallelism())) };
  const child = fork(script, [String(seconds), withHashes ? 'hashes' : 'verifies'], {
    env,
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return Argon2ResultSchema.parse(await firstMessage(child, 'the argon2 baseline'));
}
