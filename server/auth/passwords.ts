import argon2 from 'argon2';
import type { Config } from '../config.js';

export interface PasswordHasher {
  hash(password: string): Promise<string>;
  verify(hash: string, password: string): Promise<boolean>;
  /** Spends the time of one verification, so an unknown email answers as slowly as a wrong password. */
  burn(password: string): Promise<void>;
}

// argon2 runs on libuv's thread pool, off the event loop.
export function passwordHasher(config: Config['argon2']): PasswordHasher {
  const options: argon2.HashOptions = { type: argon2.argon2id, memoryCost: config.memoryCost, timeCost: config.timeCost, parallelism: 1 };
  // Made at once, so even the first unknown-email login costs exactly one verification.
  const dummyHash = argon2.hash('not a real password', options);
  return {
    hash: (password) => argon2.hash(password, options),
    verify: (hash, password) => argon2.verify(hash, password).catch(() => false),
    burn: async (password) => {
      await argon2.verify(await dummyHash, password).catch(() => false);
    },
  };
}
