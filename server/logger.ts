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
