import path from 'node:path';
import type { Logger } from 'pino';
import { fileSystemStorage } from './attachments/fs-storage.js';
import { loadSigningKey } from './auth/keys.js';
import { passwordHasher } from './auth/passwords.js';
import { loginThrottle, registrationThrottle } from './auth/throttle.js';
import { accessTokens } from './auth/tokens.js';
import type { Config } from './config.js';
import type { AppContext } from './context.js';
import type { Database } from './db/database.js';
import { ensureAdmin } from './users/accounts.js';

/** Everything the app needs beside the database: keys, hashing, throttling; and the first admin. */
export async function createContext(config: Config, db: Database, logger: Logger): Promise<AppContext> {
  const signingKey = await loadSigningKey(config.jwt.privateKeyPem, config.dataDir);
  const ctx: AppContext = {
    config,
    db,
    logger,
    signingKey,
    tokens: accessTokens(signingKey, config.jwt),
    passwords: passwordHasher(config.argon2),
    loginThrottle: loginThrottle(db.prisma, config.loginThrottle),
    registrationThrottle: registrationThrottle(db.prisma, config.registrationsPerAddressPerHour),
    attachmentStorage: await fileSystemStorage(path.join(config.dataDir, 'attachments')),
  };
  if (config.admin) {
    const admin = await ensureAdmin(ctx, config.admin, { promoteExisting: false });
    logger.info({ userId: admin.id, email: admin.email }, 'administrator from configuration is present');
  }
  return ctx;
}
