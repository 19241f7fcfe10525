// `npm run restore -- FILE`: loads a backup made by `npm run dump` into the configured database and
// attachment storage, which must hold no data yet. The service must be stopped.
import { restoreService } from '../backup/restore.js';
import { loadConfig } from '../config.js';
import { openDatabaseForCommand } from '../db/command-database.js';
import { openAttachmentStorage } from '../storage/open-storage.js';
import { runCommand } from './run.js';

const [file, ...rest] = process.argv.slice(2);
if (!file || rest.length > 0) {
  console.error(
    'usage: npm run restore -- FILE   (into an empty database and attachment storage, with the service stopped)',
  );
  process.exit(2);
}
runCommand('restore', async () => {
  const config = loadConfig({ ...process.env, ADMIN_EMAIL: undefined, ADMIN_PASSWORD: undefined });
  const db = await openDatabaseForCommand(config, { exclusive: true });
  try {
    const storage = await openAttachmentStorage(config);
    try {
      const manifest = await restoreService(db, storage, file, (message) => console.error(`restore: ${message}`));
      const rows = manifest.tables.reduce((n, t) => n + t.rows, 0);
      console.log(
        `restored ${file}: ${rows} rows in ${manifest.tables.length} tables, ${manifest.attachments.length} attachments`,
      );
    } finally {
      await storage.close();
    }
  } finally {
    await db.close();
  }
});
