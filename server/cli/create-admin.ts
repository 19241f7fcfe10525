// `npm run create-admin -- <email> [name]`: creates (or promotes) an administrator. The password is
// read from ADMIN_PASSWORD or, when unset, from standard input, so it never lands in shell history.
import { createInterface } from 'node:readline/promises';
import { pino } from 'pino';
import { EmailSchema, PasswordSchema } from '../../contract/common.js';
import { createContext } from '../bootstrap.js';
import { loadConfig } from '../config.js';
import { openDatabase } from '../db/database.js';
import { migrate } from '../db/migrate.js';
import { ensureAdmin } from '../users/accounts.js';

const [emailArg, nameArg] = process.argv.slice(2);
const email = EmailSchema.safeParse(emailArg);
if (!email.success) {
  console.error('usage: npm run create-admin -- <email> [name]   (password from ADMIN_PASSWORD or standard input)');
  process.exit(2);
}
let password = process.env.ADMIN_PASSWORD;
if (!password) {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  password = (await rl.question('Password (8-128 characters): ')).trim();
  rl.close();
}
if (!PasswordSchema.safeParse(password).success) {
  console.error('The password must be 8 to 128 characters long');
  process.exit(2);
}
const config = { ...loadConfig(), admin: undefined };
const db = await openDatabase(config);
try {
  await migrate(db.sql);
  const ctx = await createContext(config, db, pino({ level: 'silent' }));
  const admin = await ensureAdmin(ctx, { email: email.data, password, name: nameArg ?? 'Administrator' });
  console.log(`administrator ${admin.email} (${admin.id}) is present`);
} finally {
  await db.close();
}
