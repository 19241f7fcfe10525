// Baseline (c): raw argon2id throughput with the service's parameters (m=19456 KiB, t=2, p=1, the
// same @node-rs/argon2), one operation in flight per core: the cores the service has (its
// PASSWORD_HASH_CONCURRENCY is the cores divided among its workers), each kept busy. Runs in a
// child process (with a libuv thread pool at least that large); answers over IPC.
import { availableParallelism } from 'node:os';
import { hash, verify, type Options } from '@node-rs/argon2';
import type { Argon2Result } from './argon2-run.js';

const ARGON2ID = 2; // Algorithm.Argon2id (a const enum, unreadable with isolated modules)
const OPTIONS: Options = { algorithm: ARGON2ID, memoryCost: 19_456, timeCost: 2, parallelism: 1 };
const measureSeconds = Number(process.argv[2] ?? 5);
const withHashes = process.argv[3] === 'hashes';
const concurrency = availableParallelism();

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
const hashesPerSecond = withHashes
  ? await throughput(() => hash('bench user password', OPTIONS), measureSeconds)
  : null;
const verifiesPerSecond = await throughput(() => verify(stored, 'bench user password'), measureSeconds);
process.send?.({ concurrency, hashesPerSecond, verifiesPerSecond } satisfies Argon2Result, () => process.disconnect());
