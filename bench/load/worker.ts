// The load generator: a child process of the harness, so that it never shares an event loop with
// the service, a baseline or another load. It receives loads over IPC, one at a time, and answers
// each with its result.
import autocannon from 'autocannon';
import { autocannonRequests } from './requests.js';
import { LoadSpecSchema, type LoadReply, type LoadResult } from './spec.js';
import type { z } from 'zod';

async function run(spec: z.output<typeof LoadSpecSchema>): Promise<LoadResult> {
  const result = await autocannon({
    url: spec.url,
    connections: spec.connections,
    duration: spec.seconds,
    requests: autocannonRequests(spec.requests),
    ...(spec.rate !== undefined && { overallRate: spec.rate }),
    ...(spec.warmupSeconds > 0 && { warmup: { connections: spec.connections, duration: spec.warmupSeconds } }),
  });
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = count ?? 0;
  return {
    answers: result.requests.total,
    requestsPerSecond: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    errors: result.non2xx + result.errors,
    statusCodes,
    socketErrors: result.errors,
  };
}

// One load after another for the whole run; the harness disconnects at the end.
process.on('message', (message: unknown) => {
  const reply = (answer: LoadReply) => process.send?.(answer);
  Promise.resolve(message)
    .then((load) => run(LoadSpecSchema.parse(load)))
    .then(
      (result) => reply({ ok: true, result }),
      (error: unknown) => reply({ ok: false, error: error instanceof Error ? error.message : String(error) }),
    );
});
process.on('disconnect', () => process.exit(0));
