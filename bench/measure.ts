// One measured workload: the load (and its probe) from the load generator's process, while the target's
// process tree is sampled for its peak resident memory.
import { runLoads } from './load/run.js';
import type { LoadRequests, LoadResult } from './load/spec.js';
import { cpuSeconds, sampleRss } from './rss.js';
import type { TurnRequests } from './workloads.js';

export interface Timing {
  connections: number;
  warmupSeconds: number;
  seconds: number;
}

export interface Measured {
  result: LoadResult;
  probe: LoadResult | undefined;
  peakRssMiB: number;
  /**
   * CPU milliseconds the target's Node.js processes used per answer, warm-up included in both (from
   * /proc: exact where a profile's samples count time spent waiting for a core as the code's).
   */
  cpuMsPerAnswer: number;
}

/**
 * The probe is one connection asking 20 times a second, as a (keen) liveness checker would: its
 * latency is what is measured, and a probe as fast as answers come would be a second load taking
 * the cores from the one measured.
 */
const PROBES_PER_SECOND = 20;

export async function measure(
  url: string,
  pid: number,
  timing: Timing,
  requests: LoadRequests,
  probe?: LoadRequests,
): Promise<Measured> {
  const sampler = sampleRss(pid);
  const cpuBefore = await cpuSeconds(pid);
  const load = { url, ...timing, requests };
  const loads = probe ? [load, { ...load, connections: 1, rate: PROBES_PER_SECOND, requests: probe }] : [load];
  const results = await runLoads(loads).catch(async (error: unknown) => {
    await sampler.stop();
    throw error;
  });
  const peakRssMiB = await sampler.stop();
  const cpuUsed = (await cpuSeconds(pid)) - cpuBefore;
  const [result, probeResult] = results;
  if (!result) throw new Error('the load generator returned no result');
  // The warm-up's answers are not counted: at the measured rate, it answered about as many per second.
  const answered = result.answers * (1 + timing.warmupSeconds / timing.seconds);
  return { result, probe: probeResult, peakRssMiB, cpuMsPerAnswer: answered > 0 ? (cpuUsed * 1000) / answered : 0 };
}

/** What a measurement is taken of: a server (its process tree for memory) and the requests sent to it. */
export interface Target {
  url: string;
  pid: number;
  requests: TurnRequests;
}

/** The requests of one turn: made afresh when they are made per turn. */
export const turnRequests = (requests: TurnRequests): Promise<LoadRequests> =>
  typeof requests === 'function' ? requests() : Promise.resolve(requests);

/** A turn of the full run: long enough that its 50 connections' start and end weigh little. */
const TURN_SECONDS = 3;
/** Before each turn after the first: the connections opened again and the server back in its stride. */
const REWARM_SECONDS = 1;

/**
 * Each target measured in turns, one after the other, `timing.seconds` in all for each: the cores
 * here are shared, and their speed drifts by a third within the hour (the runtime baseline moved
 * from 20,000 to 13,000 req/s in one morning), so a twin measured in one block before the service
 * could find another machine than the service did. Turns make both see the same one. The first turn
 * of each warms up for `timing.warmupSeconds`; p99 is the worst turn's, p50 the middle turn's.
 */
export async function measureInTurns(targets: Target[], timing: Timing): Promise<Measured[]> {
  const turns = Math.max(1, Math.round(timing.seconds / TURN_SECONDS));
  const taken: Measured[][] = targets.map(() => []);
  for (let turn = 0; turn < turns; turn++) {
    for (const [i, target] of targets.entries()) {
      const warmupSeconds = turn === 0 ? timing.warmupSeconds : REWARM_SECONDS;
      taken[i]?.push(
        await measure(
          target.url,
          target.pid,
          { ...timing, warmupSeconds, seconds: timing.seconds / turns },
          await turnRequests(target.requests),
        ),
      );
    }
  }
  return taken.map((parts) => combined(parts, timing.seconds));
}

function combined(parts: Measured[], seconds: number): Measured {
  const results = parts.map((part) => part.result);
  const sum = (pick: (r: LoadResult) => number) => results.reduce((total, r) => total + pick(r), 0);
  const statusCodes: Record<string, number> = {};
  for (const r of results)
    for (const [code, count] of Object.entries(r.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count;
  const p50s = results.map((r) => r.p50Ms).sort((a, b) => a - b);
  const answers = sum((r) => r.answers);
  return {
    result: {
      answers,
      requestsPerSecond: answers / seconds,
      p50Ms: p50s[Math.floor(p50s.length / 2)] ?? 0,
      p99Ms: Math.max(...results.map((r) => r.p99Ms)),
      errors: sum((r) => r.errors),
      statusCodes,
      socketErrors: sum((r) => r.socketErrors),
    },
    probe: undefined,
    peakRssMiB: Math.max(...parts.map((part) => part.peakRssMiB)),
    cpuMsPerAnswer:
      parts.reduce((sum, part) => sum + part.cpuMsPerAnswer * part.result.answers, 0) / Math.max(1, answers),
  };
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
