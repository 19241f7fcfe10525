import { OperatorError } from '../operator-error.js';

/**
 * Runs a command (the service, a CLI) and reports its failure in one line: an operator's error
 * as it is, anything else as an unexpected failure (its stack only with DEBUG set).
 */
export function runCommand(name: string, command: () => Promise<void>): void {
  command().catch((error: unknown) => {
    if (error instanceof OperatorError) {
      console.error(`${name}: ${error.message}`);
    } else {
      const message = error instanceof Error ? error.message : String(error);
      console.error(
        `${name}: unexpected failure: ${message.split('\n')[0]}${process.env.DEBUG ? '' : ' (set DEBUG=1 for details)'}`,
      );
      if (process.env.DEBUG) console.error(error);
    }
    process.exitCode = 1;
  });
}
