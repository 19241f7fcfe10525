import cluster from 'node:cluster';
import { runCommand } from './cli/run.js';
import { loadConfig } from './config.js';
import { listenForStopSignals, StartAborted } from './lifecycle.js';
import { createLogger, exitOnceLogged } from './logger.js';
import { HTTP_WORKER_ENV } from './processes/messages.js';

// From the first moment: a signal during start-up stops the start (and the embedded server).
const stops = listenForStopSignals();
runCommand('task-service', async () => {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  try {
    // Each process loads only its own part: the main one no HTTP app (unless it serves alone), a worker no migrations or housekeeping.
    if (cluster.isWorker && process.env[HTTP_WORKER_ENV])
      await (await import('./processes/worker.js')).runWorker(config, logger, stops);
    else await (await import('./processes/primary.js')).runMain(config, logger, stops);
  } catch (error) {
    // A step cut short by the stop (initdb ended by the same signal, a connection closed) is the stop too.
    if (!(error instanceof StartAborted || stops.signal.aborted)) throw error;
    const signal = error instanceof StartAborted ? error.signal : String(stops.signal.reason);
    logger.info({ signal, ...(error instanceof StartAborted ? {} : { err: error }) }, 'stopped while starting');
    exitOnceLogged(logger, 0);
  }
});
