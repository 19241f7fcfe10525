import type { Statement } from './query.js';
// A change and the kept answer that reports it commit together (docs/api-guide.md, idempotency): for a
// request under an Idempotency-Key, the write paths (SqlDatabase.pipeline and .transaction) leave
// their transaction open once its work is done and hand it here; the idempotency middleware then
// writes the answer in it and commits before the answer goes out. A crash leaves both or neither.
import { AsyncLocalStorage } from 'node:async_hooks';

/** A statement with its parameters ($1, $2, … in the text). */
export type KeptStatement = Statement;

/** A write transaction whose work is done, still open. */
export interface OpenTransaction {
  /** Runs `last` in it (when given), then commits; rejects when either failed: then nothing of it stays. */
  commit(last?: KeptStatement): Promise<void>;
  rollback(): Promise<void>;
}

/** The request went away (its connection closed) before its change committed: the change is undone. */
export class RequestAbandoned extends Error {
  constructor() {
    super('The request was abandoned before its change committed');
  }
}

export type Outcome = 'committed' | 'rolled_back' | 'none';

/**
 * One request's answer keeper. While the request runs, the last write transaction stays open here
 * (an earlier one commits when the next begins: one connection per request, never a wait on
 * itself); `finish` ends it with the answer, `abandon` undoes it.
 */
export class AnswerKeeper {
  private open: OpenTransaction | undefined;
  private effects: (() => void)[] = [];
  private state: 'running' | 'answering' | 'abandoned' = 'running';

  /** Before a write transaction begins: the request's earlier one, if open, commits first. */
  async beforeWrite(): Promise<void> {
    if (this.state === 'abandoned') throw new RequestAbandoned();
    const earlier = this.open;
    this.open = undefined;
    if (earlier) await this.commit(earlier);
  }

  /**
   * Takes a transaction whose work is done: keeps it open for the answer while the request runs,
   * commits it when the answer is already being kept, rolls it back (and throws) when the request
   * was abandoned.
   */
  async keep(tx: OpenTransaction): Promise<void> {
    if (this.state === 'abandoned') {
      await tx.rollback();
      throw new RequestAbandoned();
    }
    if (this.state === 'answering') return this.commit(tx);
    const earlier = this.open;
    this.open = tx;
    if (earlier) await this.commit(earlier); // two writes at once in one request: the earlier one cannot wait for the answer
  }

  /** Runs `effect` once the open transaction committed (never if it rolls back); at once when none is open. */
  afterCommit(effect: () => void): void {
    if (this.open) this.effects.push(effect);
    else outsideRequest(effect);
  }

  /**
   * Ends the request's open transaction: with `answer` written in it and committed, or (no answer:
   * a 5xx) rolled back; `rolled_back` too when the request was abandoned before. Says what it did;
   * rejects when the commit failed (nothing of it stays).
   */
  async finish(answer: KeptStatement | undefined): Promise<Outcome> {
    if (this.state === 'abandoned') return 'rolled_back';
    this.state = 'answering';
    const open = this.open;
    this.open = undefined;
    if (!open) return 'none';
    if (!answer) {
      this.effects = [];
      await open.rollback();
      return 'rolled_back';
    }
    await this.commit(open, answer);
    return 'committed';
  }

  /** The request's connection closed before its answer: its open transaction is rolled back, and any later one. */
  async abandon(): Promise<void> {
    this.state = 'abandoned';
    const open = this.open;
    this.open = undefined;
    this.effects = [];
    await open?.rollback();
  }

  private async commit(tx: OpenTransaction, answer?: KeptStatement): Promise<void> {
    const effects = this.effects;
    this.effects = [];
    await tx.commit(answer);
    effects.forEach(outsideRequest);
  }
}

const keepers = new AsyncLocalStorage<AnswerKeeper>();

/** Runs `work` (the rest of a request under an Idempotency-Key) with `keeper` taking its write transactions. */
export const keepingAnswers = <T>(keeper: AnswerKeeper, work: () => T): T => keepers.run(keeper, work);

/** The keeper of the request running now, if it takes write transactions. */
export const answerKeeper = (): AnswerKeeper | undefined => keepers.getStore();

/** Runs `effect` after the current request's write commits (at once outside such a request). */
export function afterCommit(effect: () => void): void {
  const keeper = keepers.getStore();
  if (keeper) keeper.afterCommit(effect);
  else effect();
}

// What runs after a commit (waking readers, workers) is not the request's: its writes commit on their own.
const outsideRequest = (effect: () => void): void => keepers.exit(effect);
