import cluster, { type Worker } from 'node:cluster';
import { v7 as uuidv7 } from 'uuid';
import { AggregatorRegistry, type Registry } from 'prom-client';
import { z } from 'zod';

// With several HTTP workers, /metrics describes the whole instance: the worker that takes the scrape
// asks the main process, which collects every worker's registries and its own and sums them with
// prom-client's aggregation (counters and histograms summed, each default metric as prom-client says).
const ASK = 'task-service:metrics:ask'; // worker → main: the instance's metrics, please
const ANSWER = 'task-service:metrics:answer'; // main → worker: the text, or why not
const COLLECT = 'task-service:metrics:collect'; // main → every worker: your registries
const COLLECTED = 'task-service:metrics:collected'; // worker → main

/** A worker that does not answer by then (dying, stuck) fails the scrape rather than make counters dip. */
const COLLECT_TIMEOUT_MS = 5_000;

const MetricsJsonSchema = z.array(z.object({ name: z.string() }).passthrough());
const AskSchema = z.object({ type: z.literal(ASK), id: z.string() });
const AnswerSchema = z.object({
  type: z.literal(ANSWER),
  id: z.string(),
  text: z.string().optional(),
  error: z.string().optional(),
});
const CollectSchema = z.object({ type: z.literal(COLLECT), id: z.string() });
const CollectedSchema = z.object({
  type: z.literal(COLLECTED),
  id: z.string(),
  registries: z.array(MetricsJsonSchema),
});

/** One registry's `getMetricsAsJSON()`, as it crosses the IPC channel. */
type MetricsJson = object[];
export type Registries = () => Registry[];

/** Sends over IPC unless the worker is gone (a send to a dead worker would be an unhandled error). */
function tell(worker: Worker, message: object): void {
  if (worker.isConnected()) worker.send(message, undefined, undefined, () => undefined);
}

const asJson = (registries: Registry[]): Promise<MetricsJson[]> =>
  Promise.all(registries.map((registry) => registry.getMetricsAsJSON()));

/** The Prometheus text of several processes' registries, summed as prom-client's cluster support does. */
async function aggregated(registries: MetricsJson[]): Promise<string> {
  return AggregatorRegistry.aggregate(registries).metrics();
}

let workerRegistries: Registries | undefined;
const pendingAsks = new Map<string, { resolve: (text: string) => void; reject: (error: Error) => void }>();

/**
 * In a cluster worker: answers the main process's collection with `registries` (this worker's), and
 * receives the answers to its own asks. Installed once per process; a later call replaces the registries.
 */
export function reportMetricsToMainProcess(registries: Registries): void {
  const installed = workerRegistries !== undefined;
  workerRegistries = registries;
  if (installed) return;
  process.on('message', (message: unknown) => {
    const collect = CollectSchema.safeParse(message);
    if (collect.success) {
      void asJson(workerRegistries?.() ?? []).then((json) =>
        process.send?.({ type: COLLECTED, id: collect.data.id, registries: json }),
      );
      return;
    }
    const answer = AnswerSchema.safeParse(message);
    if (!answer.success) return;
    const pending = pendingAsks.get(answer.data.id);
    pendingAsks.delete(answer.data.id);
    if (answer.data.text !== undefined) pending?.resolve(answer.data.text);
    else pending?.reject(new Error(answer.data.error ?? 'the main process could not collect the metrics'));
  });
}

/** In a cluster worker: the whole instance's metrics, as the main process sums them. */
export function instanceMetricsFromMainProcess(): Promise<string> {
  const id = uuidv7();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      pendingAsks.delete(id);
      reject(new Error('the main process did not answer with the metrics'));
    }, 2 * COLLECT_TIMEOUT_MS);
    pendingAsks.set(id, {
      resolve: (text) => (clearTimeout(timer), resolve(text)),
      reject: (error) => (clearTimeout(timer), reject(error)),
    });
    process.send?.({ type: ASK, id });
  });
}

/** Asks every live worker for its registries; rejects when one does not answer in time. */
function collectFromWorkers(): Promise<MetricsJson[]> {
  const id = uuidv7();
  const workers = Object.values(cluster.workers ?? {}).filter(
    (worker): worker is Worker => worker?.isConnected() === true,
  );
  const answers = workers.map(
    (worker) =>
      new Promise<MetricsJson[]>((resolve, reject) => {
        const timer = setTimeout(
          () => finish(new Error(`worker ${worker.process.pid} did not report its metrics in time`)),
          COLLECT_TIMEOUT_MS,
        );
        const onMessage = (message: unknown) => {
          const collected = CollectedSchema.safeParse(message);
          if (collected.success && collected.data.id === id) finish(undefined, collected.data.registries);
        };
        const onExit = () => finish(new Error(`worker ${worker.process.pid} exited while reporting its metrics`));
        function finish(error: Error | undefined, registries: MetricsJson[] = []) {
          clearTimeout(timer);
          worker.off('message', onMessage);
          worker.off('exit', onExit);
          if (error) reject(error);
          else resolve(registries);
        }
        worker.on('message', onMessage);
        worker.once('exit', onExit);
        tell(worker, { type: COLLECT, id });
      }),
  );
  return Promise.all(answers).then((all) => all.flat());
}

/**
 * In the main process of several HTTP workers: answers a worker's ask with the sum of every worker's
 * registries and the main process's own (`own`: webhook deliveries, the event listener, its pool).
 */
export function aggregateMetricsForWorkers(own: Registries): void {
  cluster.on('message', (worker, message: unknown) => {
    const ask = AskSchema.safeParse(message);
    if (!ask.success) return;
    Promise.all([asJson(own()), collectFromWorkers()])
      .then(([mine, theirs]) => aggregated([...mine, ...theirs]))
      .then(
        (text) => tell(worker, { type: ANSWER, id: ask.data.id, text }),
        (error: unknown) =>
          tell(worker, {
            type: ANSWER,
            id: ask.data.id,
            error: error instanceof Error ? error.message : String(error),
          }),
      );
  });
}
