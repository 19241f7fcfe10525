import type { Options } from '@node-rs/argon2';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { z } from 'zod';

/** What a hashing thread is asked; a verification of a malformed hash answers `verified: false`. */
export type HashingJob = { op: 'hash'; password: string } | { op: 'verify'; hash: string; password: string };

const FailureSchema = z.object({ error: z.string() });

/** The nice value the hashing threads give themselves: any runnable event loop (nice 0) wins a core over them. */
const HASHING_NICE = 10;

// Plain CommonJS evaluated as the thread's code, so one source serves vitest (TS sources) and dist/ alike.
// On Linux /proc/thread-self is "<pid>/task/<tid>", and setpriority on a tid renices that thread alone.
const threadSource = (argon2: string) => `
const { parentPort, workerData } = require('node:worker_threads');
const { hashSync, verifySync } = require(${JSON.stringify(argon2)});
try {
  require('node:os').setPriority(Number(require('node:fs').readlinkSync('/proc/thread-self').split('/').pop()), ${HASHING_NICE});
} catch {} // not Linux: normal priority
const verified = (hash, password) => { try { return verifySync(hash, password); } catch { return false; } };
parentPort.on('message', (job) => {
  try {
    parentPort.postMessage(job.op === 'hash' ? { hash: hashSync(job.password, workerData) } : { verified: verified(job.hash, job.password) });
  } catch (error) {
    parentPort.postMessage({ error: String(error instanceof Error ? error.message : error) });
  }
});
`;

interface Queued {
  job: HashingJob;
  answered(reply: unknown): void;
  failed(error: Error): void;
}

export interface HashingThreads {
  /** Runs `job` on an idle thread (FIFO after those waiting) and reads its answer with `answer`. */
  run<T>(job: HashingJob, answer: z.ZodType<T>): Promise<T>;
  /** Jobs not yet handed to a thread. */
  waiting(): number;
  /** Ends the threads; what is running or waiting is rejected. */
  close(): Promise<void>;
}

/**
 * Jobs a thread holds at once: the one it runs and the next, already in its port, so that it starts
 * the next the moment it ends one instead of idling until a busy event loop reads its answer and
 * sends more (a tenth of the hashing threads' time under a login storm).
 */
const JOBS_PER_THREAD = 2;

/**
 * Up to `size` worker threads running argon2 synchronously at low priority, started as work comes
 * and kept (unreferenced while idle, so they never hold the process open). A hand-written pool
 * rather than piscina: its worker must be a file, which differs between the TS sources (vitest)
 * and dist/, and what is needed here (a FIFO queue, two jobs per thread, replace the dead) is short.
 */
export function startHashingThreads(size: number, options: Options): HashingThreads {
  const source = threadSource(createRequire(import.meta.url).resolve('@node-rs/argon2'));
  /** Each thread's jobs, in the order it runs them (its port keeps that order). */
  const posted = new Map<Worker, Queued[]>();
  const waiting: Queued[] = [];
  let closed = false;

  const closedError = () => new Error('the password hashing threads are closed');

  const spawn = (): Worker => {
    // No inherited flags: `--input-type=module` would make the source an ES module, without `require`.
    const worker = new Worker(source, { eval: true, execArgv: [], workerData: options });
    worker.unref();
    posted.set(worker, []);
    // 'error' is followed by 'exit': the first one fails its jobs, and work waiting gets a new thread.
    const lost = (error: Error) => {
      const jobs = posted.get(worker) ?? [];
      posted.delete(worker);
      for (const job of jobs) job.failed(closed ? closedError() : error);
      if (!closed) dispatch();
    };
    worker.on('message', (reply: unknown) => {
      const jobs = posted.get(worker);
      const done = jobs?.shift();
      if (!jobs || !done) return;
      if (jobs.length === 0) worker.unref();
      done.answered(reply);
      dispatch();
    });
    worker.on('error', (error) => lost(new Error(`a password hashing thread failed: ${String(error)}`)));
    worker.on('exit', (code) => lost(new Error(`a password hashing thread exited with code ${code}`)));
    return worker;
  };

  /** The thread to give a job: an idle one, else a new one while there are fewer than `size`, else the least busy with room. */
  const threadWithRoom = (): Worker | undefined => {
    let best: Worker | undefined;
    let fewest = JOBS_PER_THREAD;
    for (const [worker, jobs] of posted) {
      if (jobs.length < fewest) [best, fewest] = [worker, jobs.length];
    }
    if (fewest > 0 && posted.size < size) return spawn();
    return best;
  };

  const dispatch = () => {
    while (waiting.length > 0) {
      let worker: Worker | undefined;
      try {
        worker = threadWithRoom();
      } catch (error) {
        waiting.shift()?.failed(new Error(`no password hashing thread could be started: ${String(error)}`));
        continue;
      }
      if (!worker) return; // every thread holds its jobs' worth
      const next = waiting.shift();
      if (!next) return;
      posted.get(worker)?.push(next);
      // Held open while it works: someone awaits the answer.
      worker.ref();
      worker.postMessage(next.job);
    }
  };

  return {
    run: (job, answer) =>
      new Promise((resolve, reject) => {
        if (closed) return reject(closedError());
        waiting.push({
          job,
          answered: (reply) => {
            const parsed = answer.safeParse(reply);
            if (parsed.success) return resolve(parsed.data);
            const failure = FailureSchema.safeParse(reply);
            reject(
              new Error(failure.success ? failure.data.error : 'a password hashing thread gave an unexpected answer'),
            );
          },
          failed: reject,
        });
        dispatch();
      }),
    waiting: () => waiting.length,
    close: async () => {
      closed = true;
      for (const queued of waiting.splice(0)) queued.failed(closedError());
      await Promise.all([...posted.keys()].map((worker) => worker.terminate()));
    },
  };
}
