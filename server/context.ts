import type { Logger } from 'pino';
import type { AttachmentStorage } from './storage/storage.js';
import type { AccessTokens } from './security/tokens.js';
import type { PasswordHasher } from './security/passwords.js';
import type { SigningKey } from './security/keys.js';
import type { LoginThrottle, RegistrationThrottle } from './security/throttle.js';
import type { Config } from './config.js';
import type { Database } from './db/database.js';
import type { RequestLimiter } from './limits/request-limiter.js';
import type { CursorCodec } from './http/pagination.js';

/** What every part of the service is built from; tests build as many as they like. */
export interface AppContext {
  config: Config;
  db: Database;
  logger: Logger;
  signingKey: SigningKey;
  tokens: AccessTokens;
  passwords: PasswordHasher;
  loginThrottle: LoginThrottle;
  registrationThrottle: RegistrationThrottle;
  attachmentStorage: AttachmentStorage;
  /** The general request rate limit; undefined when it is off. */
  requestLimiter: RequestLimiter | undefined;
  cursors: CursorCodec;
}
