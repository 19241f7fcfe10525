// `npm run dump -- FILE`: writes a backup of the database and the attachments to FILE, while the
// service runs (on the embedded default, through the running service's server) or not.
import { dumpService } from '../backup/dump.js';
import { loadConfig } from '../config.js';
import { openDatabaseForCommand } from '../db/command-database.js';
import { openAttachmentStorage } from '../storage/open-storage.js';
import { runCommand } from './run.js';

const [file, ...rest] = process.argv.slice(2);
if (!file || rest.length > 0) {
  console.error('usage: npm run dump -- FILE   (writes a .tar.gz backup of the database and the attachments)');
  process.exit(2);
}
runCommand('dump', async () => {
  // Only what the data needs: no admin is made by this command.
  const config = loadConfig({ ...process.env, ADMIN_EMAIL: undefined, ADMIN_PASSWORD: undefined });
  const db = await openDatabaseForCommand(config, { exclusive: false });
  try {
    const storage = await openAttachmentStorage(config);
    try {
      const { file: written, manifest } = await dumpService(db.url, storage, file, (message) =>
        console.error(`dump: ${message}`),
      );
      const rows = manifest.tables.reduce((n, t) => n + t.rows, 0);
      console.log(
        `wrote ${written}: ${rows} rows in ${manifest.tables.length} tables, ${manifest.attachments.length} attachments`,
      );
    } finally {
      await storage.close();
    }
  } finally {
    await db.close();
  }
});
