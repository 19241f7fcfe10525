// `npm run migrate`: applies pending migrations to the configured database and exits.
// Safe to run while instances start: migrations are serialised by an advisory lock.
import { loadConfig } from '../config.js';
import { onDirectConnection, openDatabase } from '../db/database.js';
import { migrate } from '../db/migrate.js';
import { runCommand } from './run.js';

runCommand('migrate', async () => {
  const db = await openDatabase(loadConfig());
  try {
    const applied = await onDirectConnection(db, (sql) => migrate(sql));
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'the database schema is current');
  } finally {
    await db.close();
  }
});
