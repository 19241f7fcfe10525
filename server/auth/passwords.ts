import { hash, verify, type Options } from '@node-rs/argon2';
import pLimit from 'p-limit';
import type { Config } from '../config.js';

export interface PasswordHasher {
  hash(password: string): Promise<string>;
  verify(hash: string, password: string): Promise<boolean>;
  /** Spends the time of one verification, so an unknown email answers as slowly as a wrong password. */
  burn(password: string): Promise<void>;
}

// Algorithm.Argon2id: the package declares its enums `const`, which isolated modules cannot read.
const ARGON2ID = 2;

/**
 * argon2 runs on libuv's thread pool, off the event loop, at most `config.concurrency` at once in
 * this process: a login storm then queues for the cores instead of taking every one of them from
 * the event loops (and from /healthz).
 */
export function passwordHasher(config: Config['argon2']): PasswordHasher {
  const options: Options = { algorithm: ARGON2ID, memoryCost: config.memoryCost, timeCost: config.timeCost, parallelism: 1 };
  const limit = pLimit(config.concurrency);
  // Made at once, so even the first unknown-email login costs exactly one verification.
  const dummyHash = limit(() => hash('not a real password', options));
  const check = (stored: string, password: string) => limit(() => verify(stored, password)).catch(() => false);
  return {
    hash: (password) => limit(() => hash(password, options)),
    verify: check,
    burn: async (password) => {
      await check(await dummyHash, password);
    },
  };
}
