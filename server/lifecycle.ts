/** A stop asked for by SIGTERM or SIGINT while the process was still starting. */
export class StartAborted extends Error {
  constructor(readonly signal: string) {
    super(`stopped by ${signal} while starting`);
  }
}

/** From the stop signal to the end of the whole process tree, start-up included (within 10 s: docs/operations.md). */
export const STOP_WITHIN_MS = 10_000;
/**
 * A repeat of the stop signal within this is the same request: npm forwards the signal it gets, so
 * a signal to `npm start`'s process group (a terminal's Ctrl-C, a supervisor's SIGTERM) comes twice.
 */
export const REPEAT_WITHIN_MS = 2_000;

/**
 * A last step of a process that must exit now: `forced` by a second SIGINT (it may take a few
 * seconds), or at the `deadline` (it must be over within one).
 */
export type LastStep = (why: 'forced' | 'deadline') => void;
/** What is kept back for closing the database (and stopping the embedded server) after requests. */
const CLOSING_MARGIN_MS = 2_500;

export interface StopSignals {
  /** Aborted, with the signal's name as reason, at the first SIGTERM or SIGINT. */
  readonly signal: AbortSignal;
  /** Milliseconds requests in flight may still take, so that everything ends in time. */
  requestGraceMs(): number;
  /** Throws StartAborted when a stop signal came (checked between start-up steps). */
  throwIfStopping(): void;
  /** `step`, or StartAborted as soon as a stop signal comes while it runs. */
  unlessStopped<T>(step: Promise<T>): Promise<T>;
  /** Runs `last` if the process must exit before it has ended by itself (the deadline, or a stop forced), then exits. */
  atForcedExit(last: LastStep): void;
}

/**
 * Listens for SIGTERM and SIGINT from the process's first moment, start-up included: a signal
 * aborts what is starting, and whatever stage the process is in, it exits before STOP_WITHIN_MS.
 * A repeat within REPEAT_WITHIN_MS is the same request; a SIGINT after that (an operator pressing
 * Ctrl-C again) does not wait for the grace period. SIGTERM never forces.
 */
export function listenForStopSignals(exit: (code: number) => void = (code) => process.exit(code)): StopSignals {
  const controller = new AbortController();
  const lastSteps: LastStep[] = [];
  let signalledAt = 0;
  const forceExit = (why: 'forced' | 'deadline') => {
    for (const step of lastSteps.splice(0)) {
      try {
        step(why);
      } catch {
        // Exiting regardless.
      }
    }
    exit(1);
  };
  for (const name of ['SIGTERM', 'SIGINT'] as const) {
    process.on(name, () => {
      if (!controller.signal.aborted) {
        signalledAt = Date.now();
        controller.abort(name);
        setTimeout(() => forceExit('deadline'), STOP_WITHIN_MS - 1_000).unref();
      } else if (name === 'SIGINT' && Date.now() - signalledAt >= REPEAT_WITHIN_MS) {
        forceExit('forced');
      }
    });
  }
  const aborted = () => new StartAborted(String(controller.signal.reason));
  return {
    signal: controller.signal,
    requestGraceMs: () =>
      Math.max(0, STOP_WITHIN_MS - CLOSING_MARGIN_MS - (signalledAt ? Date.now() - signalledAt : 0)),
    throwIfStopping: () => {
      if (controller.signal.aborted) throw aborted();
    },
    unlessStopped: <T>(step: Promise<T>) =>
      new Promise<T>((resolve, reject) => {
        if (controller.signal.aborted) return reject(aborted());
        const onAbort = () => reject(aborted());
        controller.signal.addEventListener('abort', onAbort, { once: true });
        step.then(resolve, reject).finally(() => controller.signal.removeEventListener('abort', onAbort));
      }),
    atForcedExit: (last) => lastSteps.push(last),
  };
}

/** Calls `stop` once, at the first stop signal (at once if it already came). */
export function whenStopping(stops: StopSignals, stop: (signal: string) => void): void {
  if (stops.signal.aborted) return stop(String(stops.signal.reason));
  stops.signal.addEventListener('abort', () => stop(String(stops.signal.reason)), { once: true });
}
