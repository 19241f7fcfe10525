import { pino, type Logger } from 'pino';

/**
 * The service's logger: one JSON object per line for log collectors, or, when standard output is a
 * terminal, pino-pretty's readable lines (formatted in a worker thread, off the event loop).
 */
export function createLogger(level: string, terminal = process.stdout.isTTY === true): Logger {
  if (!terminal) return pino({ level });
  return pino({
    level,
    transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } },
  });
}

/**
 * Ends the process once what `logger` was given is written. pino writes standard output from
 * libuv's threads, and a process.exit() right after a line can end the process before that write
 * runs: the lost line is the last, the one that says how the process ended.
 */
export function exitOnceLogged(logger: Logger, code?: number): void {
  logger.flush(() => process.exit(code));
}
