// `npm start`, `npm run migrate`, `npm run create-admin`: builds what changed, then runs the
// compiled entry point in this same process (`node scripts/run.mjs server/main [args…]`), so that
// npm's signals reach one process at every moment: during the build, a signal stops the compiler
// and exits; during the service's start-up and after, the service's own handlers take over.
import console from 'node:console';
import process from 'node:process';
import { pathToFileURL } from 'node:url';
import { compilers } from '../contract/build.mjs';
import { build, bundledEntry } from './build.mjs';

const [entry, ...args] = process.argv.slice(2);
if (!entry) {
  console.error('usage: node scripts/run.mjs <entry, e.g. server/main> [arguments]');
  process.exit(2);
}

const stopBuild = (signal) => {
  for (const child of compilers) child.kill('SIGTERM');
  process.exit(signal === 'SIGINT' ? 130 : 143);
};
process.on('SIGTERM', stopBuild);
process.on('SIGINT', stopBuild);
try {
  await build();
} catch (error) {
  console.error(error.message);
  process.exit(1);
}
process.off('SIGTERM', stopBuild);
process.off('SIGINT', stopBuild);

// While the entry loads, a stop signal is held, then raised again for the handlers it installed as
// it loaded (the service's; an entry without any ends by it as it would have). Entries start their
// work through runCommand, never with a top-level await, so loading ends at once.
const held = [];
const hold = (signal) => held.push(signal);
process.on('SIGTERM', hold);
process.on('SIGINT', hold);
// The entry sees the command line it would see run directly (cluster workers re-run argv[1]).
const file = bundledEntry(entry);
process.argv.splice(1, process.argv.length - 1, file, ...args);
try {
  await import(pathToFileURL(file).href);
} finally {
  process.off('SIGTERM', hold);
  process.off('SIGINT', hold);
  for (const signal of held) process.kill(process.pid, signal);
}
