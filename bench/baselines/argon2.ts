// Baseline (c): raw argon2id throughput with the service's parameters (m=19456 KiB, t=2, p=1, the
// same @node-rs/argon2), `concurrency` operations in flight: libuv's thread pool size, as a storm
// of logins keeps that many verifications running. Runs in a child process; answers over IPC.
import { hash, verify, type Options } from '@node-rs/argon2';
import type { Argon2Result } from './argon2-run.js';

const ARGON2ID = 2; // Algorithm.Argon2id (a const enum, unreadable with isolated modules)
const OPTIONS: Options = { algorithm: ARGON2ID, memoryCost: 19_456, timeCost: 2, parallelism: 1 };
const measureSeconds = Number(process.argv[2] ?? 5);
const concurrency = Number(process.env.UV_THREADPOOL_SIZE ?? 4);

/** Operations per second with `concurrency` loops running `op` for `seconds`. */
async function throughput(op: () => Promise<unknown>, seconds: number): Promise<number> {
  let done = 0;
  const until = Date.now() + seconds * 1000;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < until) {
        await op();
        done++;
      }
    }),
  );
  return done / ((Date.now() - started) / 1000);
}

const stored = await hash('bench user password', OPTIONS);
await throughput(() => verify(stored, 'bench user password'), 1); // warm-up: the thread pool and its memory
const hashesPerSecond = await throughput(() => hash('bench user password', OPTIONS), measureSeconds);
const verifiesPerSecond = await throughput(() => verify(stored, 'bench user password'), measureSeconds);
process.send?.({ concurrency, hashesPerSecond, verifiesPerSecond } satisfies Argon2Result, () => process.disconnect());
