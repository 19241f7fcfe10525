// Runs the argon2 baseline (argon2.ts) in a child process of its own.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { firstMessage } from '../child.js';

export const Argon2ResultSchema = z.object({ concurrency: z.number(), hashesPerSecond: z.number(), verifiesPerSecond: z.number() });
export type Argon2Result = z.infer<typeof Argon2ResultSchema>;

export async function measureArgon2(seconds: number): Promise<Argon2Result> {
  const script = fileURLToPath(new URL('./argon2.ts', import.meta.url));
  const child = fork(script, [String(seconds)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return Argon2ResultSchema.parse(await firstMessage(child, 'the argon2 baseline'));
}
