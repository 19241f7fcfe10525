// The baselines, measured in the same run with the same load settings as the workloads: the runtime
// once, argon2 around the login row, and the stack baseline (bench/baselines/stack-server.ts) kept
// running, so that each workload with a bare twin is measured on it in turns with the service.
import { publicKey } from './api.js';
import { measureArgon2, type Argon2Result } from './baselines/argon2-run.js';
import { STACK_CONFIG_VARIABLE, type ServiceStatement, type StackConfig } from './baselines/stack-config.js';
import { startBaseline, type RunningBaseline } from './baselines/start.js';
import { measure, oddAnswers, type Measured, type Timing } from './measure.js';
import type { Seeded } from './seed.js';
import { AUDIENCE, ISSUER, MAX_TASKS_PER_USER } from './service.js';
import type { Row } from './table.js';
import { tables } from '../server/db/query.js';
import { taskJson } from '../server/tasks/serialize.js';
import { visibleTask } from '../server/tasks/store.js';
import { taskReads } from './workloads.js';

export interface Baselines {
  runtime: number;
  rows: Row[];
}

/** The service's default pool size, so the stack baseline has as many connections. */
const POOL_SIZE = 10;

export function baselineRow(name: string, m: Measured): Row {
  const r = m.result;
  return {
    name,
    workers: '1',
    requestsPerSecond: r.requestsPerSecond,
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    errors: r.errors,
    peakRssMiB: m.peakRssMiB,
    vsRuntime: null,
    vsBare: null,
    target: null,
    service: false,
    note: [`CPU ${m.cpuMsPerAnswer.toFixed(2)} ms/answer`, oddAnswers(r)].filter(Boolean).join('; '),
  };
}

/** The service's read of one visible task for a caller of this kind, its parameters named by the values they carry. */
function serviceTaskRead(kind: 'member' | 'all'): ServiceStatement {
  const values = { taskId: 'the task id', userId: 'the user id' };
  const { sql, parameters } = visibleTask(values, kind).compile();
  return {
    text: sql,
    parameters: parameters.map((parameter) => {
      if (parameter === values.taskId) return 'taskId';
      if (parameter === values.userId) return 'userId';
      throw new Error(`the service's task read takes a value the twin cannot give: ${String(parameter)}`);
    }),
  };
}

/** The service's Task JSON of the row `t`, as SQL text (it takes no parameters). */
function serviceTaskJson(): string {
  const { sql, parameters } = taskJson('t').compile(tables);
  if (parameters.length > 0) throw new Error("the service's Task JSON takes parameters the twin cannot give");
  return sql;
}

/** The bare handlers of the workloads, on the service's database and with its public key. */
export async function startStackBaseline(
  serviceUrl: string,
  databaseUrl: string,
  seeded: Seeded,
): Promise<RunningBaseline> {
  const config: StackConfig = {
    databaseUrl,
    poolSize: POOL_SIZE,
    jwk: await publicKey(serviceUrl),
    issuer: ISSUER,
    audience: AUDIENCE,
    storedAttachmentCount: seeded.storedAttachmentCount,
    visibleTaskRead: { member: serviceTaskRead('member'), all: serviceTaskRead('all') },
    taskJson: serviceTaskJson(),
    maxTasksPerUser: MAX_TASKS_PER_USER,
  };
  return startBaseline('stack-server.ts', { [STACK_CONFIG_VARIABLE]: JSON.stringify(config) });
}

export async function measureBaselines(seeded: Seeded, timing: Timing): Promise<Baselines> {
  const [user] = seeded.users;
  if (!user) throw new Error('no users were seeded');
  const server = await startBaseline('runtime-server.ts');
  const runtime = await measure(server.url, server.pid, timing, taskReads(seeded, user.token)).finally(() =>
    server.stop(),
  );
  return {
    runtime: runtime.result.requestsPerSecond,
    rows: [baselineRow('baseline: runtime (node:http, fixed task body)', runtime)],
  };
}

/**
 * The login's twin: raw argon2id verifications per second, measured right before the logins and, in
 * full runs, right after them too, the row giving the mean (this machine's speed drifts within a
 * minute: one full run measured 80.9 before and 92.4 after). Login cannot take turns as the reads
 * do: each turn would begin with the previous window's abandoned logins still queued for argon2.
 * Hashes per second too, in full runs (the note).
 */
export async function argon2Twin(
  seconds: number,
  full: boolean,
): Promise<{ after: () => Promise<{ verifiesPerSecond: number; row: Row }> }> {
  const before = await measureArgon2(seconds, full);
  // A quick run measures before the logins only, to stay within its minute.
  return { after: async () => argon2Row(before, full ? await measureArgon2(seconds, false) : undefined) };
}

function argon2Row(before: Argon2Result, after: Argon2Result | undefined): { verifiesPerSecond: number; row: Row } {
  const verifiesPerSecond = after ? (before.verifiesPerSecond + after.verifiesPerSecond) / 2 : before.verifiesPerSecond;
  const notes = after
    ? [`before ${before.verifiesPerSecond.toFixed(1)}/s, after ${after.verifiesPerSecond.toFixed(1)}/s`]
    : [];
  if (before.hashesPerSecond !== null) notes.push(`hash: ${before.hashesPerSecond.toFixed(1)}/s`);
  return {
    verifiesPerSecond,
    row: {
      name: `bare: argon2id verify (m=19456 t=2 p=1, ${before.concurrency} at once)`,
      workers: '',
      requestsPerSecond: verifiesPerSecond,
      p50Ms: null,
      p99Ms: null,
      errors: null,
      peakRssMiB: null,
      vsRuntime: null,
      vsBare: null,
      target: null,
      service: false,
      note: notes.join('; '),
    },
  };
}
