// One measured workload: the load (and its probe) from the load generator's process, while the target's
// process tree is sampled for its peak resident memory.
import { runLoads } from './load/run.js';
import type { LoadRequests, LoadResult } from './load/spec.js';
import { sampleRss } from './rss.js';

export interface Timing {
  connections: number;
  warmupSeconds: number;
  seconds: number;
}

export interface Measured {
  result: LoadResult;
  probe: LoadResult | undefined;
  peakRssMiB: number;
}

/**
 * The probe is one connection asking 20 times a second, as a (keen) liveness checker would: its
 * latency is what is measured, and a probe as fast as answers come would be a second load taking
 * the cores from the one measured.
 */
const PROBES_PER_SECOND = 20;

export async function measure(url: string, pid: number, timing: Timing, requests: LoadRequests, probe?: LoadRequests): Promise<Measured> {
  const sampler = sampleRss(pid);
  const load = { url, ...timing, requests };
  const loads = probe ? [load, { ...load, connections: 1, rate: PROBES_PER_SECOND, requests: probe }] : [load];
  const results = await runLoads(loads).catch(async (error: unknown) => {
    await sampler.stop();
    throw error;
  });
  const peakRssMiB = await sampler.stop();
  const [result, probeResult] = results;
  if (!result) throw new Error('the load generator returned no result');
  return { result, probe: probeResult, peakRssMiB };
}

/** Status codes other than 2xx, and socket errors, in a few words for the note column. */
export function oddAnswers(result: LoadResult): string {
  const odd = Object.entries(result.statusCodes)
    .filter(([code]) => !code.startsWith('2'))
    .map(([code, count]) => `${count}×${code}`);
  if (result.socketErrors) odd.push(`${result.socketErrors} socket errors or timeouts`);
  if (result.answers === 0) odd.push('no answer within the window');
  return odd.join(', ');
}
