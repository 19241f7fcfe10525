// Child processes that speak over IPC: their first message, or why none came.
import type { ChildProcess } from 'node:child_process';

export function firstMessage(child: ChildProcess, what: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => {
      child.off('message', onMessage);
      reject(new Error(`${what} exited (${String(code)}) before answering`));
    };
    const onMessage = (message: unknown) => {
      child.off('exit', onExit);
      resolve(message);
    };
    child.once('message', onMessage);
    child.once('exit', onExit);
  });
}
