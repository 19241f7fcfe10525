import type { Options } from '@node-rs/argon2';
import { z } from 'zod';
import type { Config } from '../config.js';
import { startHashingThreads } from './hashing-threads.js';

export interface PasswordHasher {
  hash(password: string): Promise<string>;
  /** False for a wrong password and for a malformed hash; rejects only when its hashing thread is lost or the hasher is closed. */
  verify(hash: string, password: string): Promise<boolean>;
  /** Spends the time of one verification, so an unknown email answers as slowly as a wrong password. */
  burn(password: string): Promise<void>;
  /** Ends the hashing threads (they never hold the process open while idle). */
  close(): Promise<void>;
}

// Algorithm.Argon2id: the package declares its enums `const`, which isolated modules cannot read.
const ARGON2ID = 2;

const HashedSchema = z.object({ hash: z.string() });
const VerifiedSchema = z.object({ verified: z.boolean() });

/**
 * argon2 runs on `config.concurrency` worker threads of this process, each at nice 10 (on Linux):
 * during a login storm the event loop (and /healthz) always wins a core over them, while they still
 * take every idle cycle. More hashes than threads wait their turn, first come first served.
 */
export function passwordHasher(config: Config['argon2']): PasswordHasher {
  const options: Options = {
    algorithm: ARGON2ID,
    memoryCost: config.memoryCost,
    timeCost: config.timeCost,
    parallelism: 1,
  };
  const threads = startHashingThreads(config.concurrency, options);
  const hash = (password: string) => threads.run({ op: 'hash', password }, HashedSchema).then((answer) => answer.hash);
  const verify = (stored: string, password: string) =>
    threads.run({ op: 'verify', hash: stored, password }, VerifiedSchema).then((answer) => answer.verified);
  // Made at once, so even the first unknown-email login costs exactly one verification.
  let dummyHash = hash('not a real password');
  dummyHash.catch(() => undefined); // a failure is burn's to report
  return {
    hash,
    verify,
    burn: async (password) => {
      const dummy = dummyHash;
      const stored = await dummy.catch((error: unknown) => {
        // Its thread was lost: made again for the next login, or every unknown email would answer
        // 500 from then on while a wrong password answers 401, telling which accounts exist.
        if (dummyHash === dummy) {
          dummyHash = hash('not a real password');
          dummyHash.catch(() => undefined);
        }
        throw error;
      });
      await verify(stored, password);
    },
    close: threads.close,
  };
}
