import type { Logger } from 'pino';
import { derivedSecret, loadSigningKey } from './security/keys.js';
import { passwordHasher } from './security/passwords.js';
import { loginThrottle, registrationThrottle } from './security/throttle.js';
import { accessTokens } from './security/tokens.js';
import type { Config } from './config.js';
import type { AppContext } from './context.js';
import type { Database } from './db/database.js';
import { cursorCodec } from './http/pagination.js';
import { openRequestLimiter } from './limits/request-limiter.js';
import { openAttachmentStorage } from './storage/open-storage.js';
import { ensureAdmin } from './users/accounts.js';

/**
 * Everything the app needs beside the database: keys, hashing, throttling, attachment storage;
 * and the first admin (ADMIN_EMAIL: created when no account has that email, an existing account
 * left as it is). A store the configuration names but that cannot be used stops the start.
 */
export async function createContext(config: Config, db: Database, logger: Logger): Promise<AppContext> {
  const signingKey = await loadSigningKey(config.jwt.privateKeyPem, db.sql, config.dataDir);
  const attachmentStorage = await openAttachmentStorage(config);
  const requestLimiter = await openRequestLimiter(config, db.sql, logger).catch(async (error: unknown) => {
    await attachmentStorage.close();
    throw error;
  });
  const ctx: AppContext = {
    config,
    db,
    logger,
    signingKey,
    tokens: accessTokens(signingKey, config.jwt),
    passwords: passwordHasher(config.argon2),
    loginThrottle: loginThrottle(db.sql, config.loginThrottle),
    attachmentStorage,
    requestLimiter,
    registrationThrottle: registrationThrottle(db.sql, config.registrationsPerAddressPerHour),
    // From the token key, which every instance shares, so they accept each other's cursors.
    cursors: cursorCodec(await derivedSecret(signingKey, 'list cursors')),
  };
  if (config.admin) {
    const admin = await ensureAdmin(ctx, config.admin, { promoteExisting: false }).catch(async (error: unknown) => {
      await closeContext(ctx);
      throw error;
    });
    if (admin.role === 'admin')
      logger.info({ userId: admin.id, email: admin.email }, 'administrator from configuration is present');
    else
      logger.warn(
        { userId: admin.id, email: admin.email, role: admin.role },
        `ADMIN_EMAIL ${admin.email} belongs to an account that is not an administrator: it is left as it is. ` +
          'Promote it with `npm run create-admin -- <email>` if that is meant, or set ADMIN_EMAIL to another address.',
      );
  }
  return ctx;
}

/** Lets go of what the context opened (object store, rate limit store, hashing threads); the database is the caller's. */
export async function closeContext(ctx: AppContext): Promise<void> {
  await Promise.all([ctx.attachmentStorage.close(), ctx.requestLimiter?.close(), ctx.passwords.close()]);
}
