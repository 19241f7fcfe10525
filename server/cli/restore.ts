// `npm run restore -- FILE`: loads a backup made by `npm run dump` into the configured database and
// attachment storage, which must hold no data yet (or an unfinished restore of the same archive,
// which it finishes). The service must be stopped.
import { openArchive, restoreService } from '../backup/restore.js';
import { BackupStopped, stoppedBy } from '../backup/stopping.js';
import { loadConfig } from '../config.js';
import { openDatabaseForCommand } from '../db/command-database.js';
import { listenForStopSignals } from '../lifecycle.js';
import { openAttachmentStorage } from '../storage/open-storage.js';
import { runCommand } from './run.js';

const [file, ...rest] = process.argv.slice(2);
if (!file || rest.length > 0) {
  console.error(
    'usage: npm run restore -- FILE   (into an empty database and attachment storage, with the service stopped)',
  );
  process.exit(2);
}
// From the first moment: a stop signal ends the restore and stops the server it started.
const stops = listenForStopSignals();
runCommand('restore', async () => {
  try {
    const config = loadConfig({ ...process.env, ADMIN_EMAIL: undefined, ADMIN_PASSWORD: undefined });
    // The whole archive is checked before anything of the target is touched (or started).
    const archive = await openArchive(file, stops.signal);
    const db = await openDatabaseForCommand(config, {
      exclusive: true,
      signal: stops.signal,
      atForcedExit: stops.atForcedExit,
    });
    try {
      const storage = await openAttachmentStorage(config);
      try {
        const manifest = await restoreService(db, storage, archive, {
          log: (message) => console.error(`restore: ${message}`),
          stop: stops.signal,
        });
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
  } catch (error) {
    if (!stops.signal.aborted || error instanceof BackupStopped) throw error;
    throw new BackupStopped(`stopped by ${stoppedBy(stops.signal)}: nothing was written`);
  }
});
