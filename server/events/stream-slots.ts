import cluster, { type Worker } from 'node:cluster';
import { z } from 'zod';
import type { Config } from '../config.js';
import type { AppContext } from '../context.js';
import { perInstance } from './per-instance.js';

/** Why a stream may not open: its user holds their share, or the instance holds all it may. */
export type SlotRefusal = 'user' | 'instance';

type Limits = Pick<Config['events'], 'maxStreamsPerUser' | 'maxStreams'>;

/** Open streams per user and in all, refused past the caps. */
class SlotCounter {
  private readonly perUser = new Map<string, number>();
  private total = 0;

  constructor(private readonly limits: Limits) {}

  take(userId: string): SlotRefusal | undefined {
    const held = this.perUser.get(userId) ?? 0;
    if (held >= this.limits.maxStreamsPerUser) return 'user';
    if (this.total >= this.limits.maxStreams) return 'instance';
    this.perUser.set(userId, held + 1);
    this.total++;
    return undefined;
  }

  give(userId: string): void {
    const held = this.perUser.get(userId) ?? 0;
    if (held === 0) return;
    if (held === 1) this.perUser.delete(userId);
    else this.perUser.set(userId, held - 1);
    this.total--;
  }
}

export interface StreamSlots {
  take(userId: string): Promise<SlotRefusal | undefined>;
  give(userId: string): void;
}

// Worker → main: take or give a slot; main → worker: the answer to a take.
const SlotRequestSchema = z.object({ streamSlot: z.enum(['take', 'give']), userId: z.string(), requestId: z.number() });
const SlotAnswerSchema = z.object({ streamSlotAnswer: z.number(), refusal: z.enum(['user', 'instance']).nullable() });

/**
 * In the main process of several HTTP workers: counts every worker's streams, so the caps hold for
 * the instance whichever worker a client reaches; a worker that dies gives its slots back.
 */
export function shareStreamSlotsWithWorkers(limits: Limits): void {
  const counter = new SlotCounter(limits);
  const heldBy = new Map<number, string[]>();
  cluster.on('message', (worker: Worker, message: unknown) => {
    const request = SlotRequestSchema.safeParse(message);
    if (!request.success) return;
    const { streamSlot, userId, requestId } = request.data;
    const held = heldBy.get(worker.id) ?? [];
    heldBy.set(worker.id, held);
    if (streamSlot === 'give') {
      const index = held.indexOf(userId);
      if (index < 0) return;
      held.splice(index, 1);
      counter.give(userId);
      return;
    }
    const refusal = counter.take(userId);
    if (refusal === undefined) held.push(userId);
    worker.send({ streamSlotAnswer: requestId, refusal: refusal ?? null });
  });
  cluster.on('exit', (worker: Worker) => {
    for (const userId of heldBy.get(worker.id) ?? []) counter.give(userId);
    heldBy.delete(worker.id);
  });
}

/** A cluster worker asks the main process, which counts for all workers. */
function slotsInMainProcess(send: (message: unknown) => void): StreamSlots {
  const waiting = new Map<number, (refusal: SlotRefusal | undefined) => void>();
  let lastRequest = 0;
  process.on('message', (message: unknown) => {
    const answer = SlotAnswerSchema.safeParse(message);
    if (!answer.success) return;
    waiting.get(answer.data.streamSlotAnswer)?.(answer.data.refusal ?? undefined);
    waiting.delete(answer.data.streamSlotAnswer);
  });
  return {
    take: (userId) =>
      new Promise((resolve) => {
        const requestId = ++lastRequest;
        waiting.set(requestId, resolve);
        send({ streamSlot: 'take', userId, requestId });
      }),
    give: (userId) => send({ streamSlot: 'give', userId, requestId: 0 }),
  };
}

function slotsInThisProcess(limits: Limits): StreamSlots {
  const counter = new SlotCounter(limits);
  return { take: (userId) => Promise.resolve(counter.take(userId)), give: (userId) => counter.give(userId) };
}

/** The stream caps of this instance: counted here, or by the main process for all its workers. */
export const streamSlots = perInstance((ctx: AppContext): StreamSlots => {
  const send = process.send?.bind(process);
  return cluster.isWorker && send
    ? slotsInMainProcess((message) => send(message))
    : slotsInThisProcess(ctx.config.events);
});
