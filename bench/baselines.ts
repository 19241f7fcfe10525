// The three baselines, measured in the same run with the same load settings as the workloads.
import { publicKey } from './api.js';
import { measureArgon2 } from './baselines/argon2-run.js';
import { STACK_CONFIG_VARIABLE, type StackConfig } from './baselines/stack-config.js';
import { startBaseline, type RunningBaseline } from './baselines/start.js';
import { measure, oddAnswers, type Measured, type Timing } from './measure.js';
import type { Seeded } from './seed.js';
import { AUDIENCE, ISSUER } from './service.js';
import type { Row } from './table.js';
import { taskReads } from './workloads.js';

export interface Baselines {
  runtime: number;
  stack: number;
  argon2Verifies: number;
  rows: Row[];
}

/** The service's default pool size, so the stack baseline has as many connections. */
const POOL_SIZE = 10;

function baselineRow(name: string, m: Measured): Row {
  const r = m.result;
  return { name, workers: '1', requestsPerSecond: r.requestsPerSecond, p50Ms: r.p50Ms, p99Ms: r.p99Ms, errors: r.errors, peakRssMiB: m.peakRssMiB, vsRuntime: null, vsStack: null, vsArgon2: null, note: oddAnswers(r) };
}

async function measureServer(baseline: RunningBaseline, timing: Timing, seeded: Seeded, token: string): Promise<Measured> {
  try {
    return await measure(baseline.url, baseline.pid, timing, taskReads(seeded, token));
  } finally {
    await baseline.stop();
  }
}

export async function measureBaselines(serviceUrl: string, databaseUrl: string, seeded: Seeded, timing: Timing, argon2Seconds: number): Promise<Baselines> {
  const [user] = seeded.users;
  if (!user) throw new Error('no users were seeded');
  const runtime = await measureServer(await startBaseline('runtime-server.ts'), timing, seeded, user.token);
  const config: StackConfig = {
    databaseUrl,
    poolSize: POOL_SIZE,
    jwk: await publicKey(serviceUrl),
    issuer: ISSUER,
    audience: AUDIENCE,
    storedAttachmentCount: seeded.storedAttachmentCount,
  };
  const stack = await measureServer(await startBaseline('stack-server.ts', { [STACK_CONFIG_VARIABLE]: JSON.stringify(config) }), timing, seeded, user.token);
  const argon2 = await measureArgon2(argon2Seconds);
  return {
    runtime: runtime.result.requestsPerSecond,
    stack: stack.result.requestsPerSecond,
    argon2Verifies: argon2.verifiesPerSecond,
    rows: [
      baselineRow('baseline: runtime (node:http, fixed task body)', runtime),
      baselineRow('baseline: stack GET /tasks/{id} (jose + pg, 2 queries)', stack),
      {
        name: `baseline: argon2id verify (m=19456 t=2 p=1, ${argon2.concurrency} at once)`,
        workers: '',
        requestsPerSecond: argon2.verifiesPerSecond,
        p50Ms: null,
        p99Ms: null,
        errors: null,
        peakRssMiB: null,
        vsRuntime: null,
        vsStack: null,
        vsArgon2: null,
        note: `hash: ${argon2.hashesPerSecond.toFixed(1)}/s`,
      },
    ],
  };
}
