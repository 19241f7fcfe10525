import { hash, verify, type Options } from '@node-rs/argon2';
import type { Config } from '../config.js';

export interface PasswordHasher {
  hash(password: string): Promise<string>;
  verify(hash: string, password: string): Promise<boolean>;
  /** Spends the time of one verification, so an unknown email answers as slowly as a wrong password. */
  burn(password: string): Promise<void>;
}

// Algorithm.Argon2id: the package declares its enums `const`, which isolated modules cannot read.
const ARGON2ID = 2;

// argon2 runs on libuv's thread pool, off the event loop.
export function passwordHasher(config: Config['argon2']): PasswordHasher {
  const options: Options = { algorithm: ARGON2ID, memoryCost: config.memoryCost, timeCost: config.timeCost, parallelism: 1 };
  // Made at once, so even the first unknown-email login costs exactly one verification.
  const dummyHash = hash('not a real password', options);
  return {
    hash: (password) => hash(password, options),
    verify: (stored, password) => verify(stored, password).catch(() => false),
    burn: async (password) => {
      await verify(await dummyHash, password).catch(() => false);
    },
  };
}
