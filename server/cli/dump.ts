// `npm run dump -- FILE`: writes a backup of the database and the attachments to FILE, while the
// service runs (on the embedded default, through the running service's server) or not.
import { BackupStopped, stoppedBy } from '../backup/stopping.js';
import { dumpService } from '../backup/dump.js';
import { loadConfig } from '../config.js';
import { openDatabaseForCommand } from '../db/command-database.js';
import { listenForStopSignals } from '../lifecycle.js';
import { openAttachmentStorage } from '../storage/open-storage.js';
import { runCommand } from './run.js';

const [file, ...rest] = process.argv.slice(2);
if (!file || rest.length > 0) {
  console.error('usage: npm run dump -- FILE   (writes a .tar.gz backup of the database and the attachments)');
  process.exit(2);
}
// From the first moment: a stop signal ends the dump, leaving no file and no server it started.
const stops = listenForStopSignals();
runCommand('dump', async () => {
  try {
    // Only what the data needs: no admin is made by this command.
    const config = loadConfig({ ...process.env, ADMIN_EMAIL: undefined, ADMIN_PASSWORD: undefined });
    const db = await openDatabaseForCommand(config, {
      exclusive: false,
      signal: stops.signal,
      atForcedExit: stops.atForcedExit,
    });
    try {
      const storage = await openAttachmentStorage(config);
      try {
        const { file: written, manifest } = await dumpService(db.url, storage, file, {
          log: (message) => console.error(`dump: ${message}`),
          stop: stops.signal,
          onUnfinished: (discardNow) => stops.atForcedExit(discardNow),
        });
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
  } catch (error) {
    if (!stops.signal.aborted || error instanceof BackupStopped) throw error;
    throw new BackupStopped(`stopped by ${stoppedBy(stops.signal)}: no archive was written`);
  }
});
