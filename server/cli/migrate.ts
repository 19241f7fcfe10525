// `npm run migrate`: applies pending migrations to the configured database and exits.
// Safe to run while instances run or start (on the embedded server a service holds, too):
// migrations are serialised by an advisory lock.
import { assertNoUnfinishedRestore } from '../backup/restore-marker.js';
import { loadConfig } from '../config.js';
import { openDatabaseForCommand } from '../db/command-database.js';
import { onDirectConnection } from '../db/database.js';
import { migrate } from '../db/migrate.js';
import { runCommand } from './run.js';

runCommand('migrate', async () => {
  const db = await openDatabaseForCommand(loadConfig(), { exclusive: false });
  try {
    await assertNoUnfinishedRestore(db.sql);
    const applied = await onDirectConnection(db, (sql) => migrate(sql));
    console.log(applied.length ? `applied: ${applied.join(', ')}` : 'the database schema is current');
  } finally {
    await db.close();
  }
});
