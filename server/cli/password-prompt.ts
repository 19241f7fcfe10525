import { createInterface } from 'node:readline/promises';

/**
 * Asks for a password: on a terminal with echo off (nothing typed is shown), from a pipe as one line.
 * Ctrl-C or Ctrl-D on the terminal give up (undefined).
 */
export async function promptPassword(question: string): Promise<string | undefined> {
  const input = process.stdin;
  if (!input.isTTY) {
    const rl = createInterface({ input, terminal: false });
    const line = await new Promise<string | undefined>((resolve) => {
      rl.once('line', resolve);
      rl.once('close', () => resolve(undefined));
    });
    rl.close();
    return line?.trim();
  }
  // Echo off before the question: what is typed after it is never shown.
  input.setRawMode(true);
  process.stderr.write(question);
  input.resume();
  input.setEncoding('utf8');
  let typed = '';
  try {
    return await new Promise<string | undefined>((resolve) => {
      input.on('data', (chunk: string) => {
        for (const char of chunk) {
          if (char === '\r' || char === '\n') return resolve(typed.trim());
          if (char === '\u0003' || char === '\u0004') return resolve(undefined);
          if (char === '\u007f' || char === '\b') typed = typed.slice(0, -1);
          else if (char >= ' ') typed += char;
        }
      });
    });
  } finally {
    input.setRawMode(false);
    input.pause();
    input.removeAllListeners('data');
    process.stderr.write('\n');
  }
}
