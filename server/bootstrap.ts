import path from 'node:path';
import type { Logger } from 'pino';
import { fileSystemStorage } from './attachments/fs-storage.js';
import { derivedSecret, loadSigningKey } from './auth/keys.js';
import { passwordHasher } from './auth/passwords.js';
import { loginThrottle } from './auth/throttle.js';
import { accessTokens } from './auth/tokens.js';
import type { Config } from './config.js';
import type { AppContext } from './context.js';
import type { Database } from './db/database.js';
import { cursorCodec } from './http/pagination.js';
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
    attachmentStorage: await fileSystemStorage(path.join(config.dataDir, 'attachments')),
    // From the token key, which every instance shares, so they accept each other's cursors.
    cursors: cursorCodec(await derivedSecret(signingKey, 'list cursors')),
  };
  if (config.admin) {
    const admin = await ensureAdmin(ctx, config.admin, { promoteExisting: false });
    logger.info({ userId: admin.id, email: admin.email }, 'administrator from configuration is present');
  }
  return ctx;
}
