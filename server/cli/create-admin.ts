// `npm run create-admin -- <email> [name]`: creates (or promotes) an administrator. The password is
// read from ADMIN_PASSWORD or, when unset, from standard input (a terminal does not echo it), so it
// never lands in shell history or on the screen. Works while the service runs (on its database).
import { assertNoUnfinishedRestore } from '../backup/restore-marker.js';
import { EmailSchema, PasswordSchema } from '@task-service/client';
import { passwordHasher } from '../security/passwords.js';
import { loadConfig } from '../config.js';
import { openDatabaseForCommand } from '../db/command-database.js';
import { migrate } from '../db/migrate.js';
import { ensureAdmin } from '../users/accounts.js';
import { promptPassword } from './password-prompt.js';
import { runCommand } from './run.js';

const [emailArg, nameArg] = process.argv.slice(2);
const email = EmailSchema.safeParse(emailArg);
if (!email.success) {
  console.error('usage: npm run create-admin -- <email> [name]   (password from ADMIN_PASSWORD or standard input)');
  process.exit(2);
}
const password = process.env.ADMIN_PASSWORD || (await promptPassword('Password (8-128 characters): '));
if (password === undefined || !PasswordSchema.safeParse(password).success) {
  console.error('The password must be 8 to 128 characters long');
  process.exit(2);
}
runCommand('create-admin', async () => {
  // ADMIN_PASSWORD here is this command's input, not a start-up admin for the service.
  const config = loadConfig({ ...process.env, ADMIN_EMAIL: undefined, ADMIN_PASSWORD: undefined });
  const db = await openDatabaseForCommand(config, { exclusive: false });
  // Only what accounts need: no signing key or attachment storage is created by this command.
  const accounts = { db, passwords: passwordHasher(config.argon2) };
  try {
    await assertNoUnfinishedRestore(db.sql);
    await migrate(db.sql);
    const admin = await ensureAdmin(
      accounts,
      { email: email.data, password, name: nameArg ?? 'Administrator' },
      { promoteExisting: true },
    );
    console.log(`administrator ${admin.email} (${admin.id}) is present`);
  } finally {
    await Promise.all([accounts.passwords.close(), db.close()]);
  }
});
