// Command line of `npm run bench`: sizes and durations of the full and the quick run.
import { parseArgs } from 'node:util';
import type { SeedSize } from './seed.js';

export interface BenchOptions {
  mode: 'full' | 'quick' | 'client';
  seed: SeedSize;
  connections: number;
  warmupSeconds: number;
  seconds: number;
  /** The deep page of `GET /tasks` (or the last page, when the list is shorter). */
  deepPage: number;
  pageLimit: number;
  uploadBytes: number;
  /** WEB_CONCURRENCY for the main run; the other count of 1 and 2 gets a row for GET /tasks/{id} (full runs). */
  workers: number;
  /** The admin's lists, the other sorts, attachments and the second worker count: full runs only (`--only` still filters them). */
  everything: boolean;
  json: string | undefined;
  /**
   * A PostgreSQL server the service and the twins use (a fresh database on it, dropped at the end);
   * the embedded server when undefined. `DATABASE_URL` in the environment is the fallback.
   */
  databaseUrl: string | undefined;
  /** Exit with 1 unless every row passed its target (CI chooses whether noise may fail it). */
  strict: boolean;
  /**
   * Only the workloads whose name contains one of these (case-insensitive; `--only` takes them
   * separated by `|`), e.g. `login` or `patch|post /tasks`; every workload when undefined.
   */
  only: string[] | undefined;
}

const USAGE = `npm run bench [-- --quick | --client] [--database-url URL] [--strict] [--json FILE] [--workers N] [--seconds S] [--warmup S] [--users N] [--tasks-per-user N] [--only NAME[|NAME…]]`;

export function parseOptions(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      client: { type: 'boolean', default: false },
      json: { type: 'string' },
      'database-url': { type: 'string' },
      strict: { type: 'boolean', default: false },
      users: { type: 'string' },
      workers: { type: 'string' },
      seconds: { type: 'string' },
      warmup: { type: 'string' },
      'tasks-per-user': { type: 'string' },
      only: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const number = (value: string | undefined, fallback: number, name: string) => {
    const n = value === undefined ? fallback : Number(value);
    if (!(n > 0)) throw new Error(`--${name} must be a positive number (${USAGE})`);
    return n;
  };
  const quick = values.quick;
  return {
    mode: values.client ? 'client' : quick ? 'quick' : 'full',
    // The load is spread over 50 users with 1,000 tasks each (page 50 is their 981st to 1,000th).
    seed: {
      users: Math.round(number(values.users, 50, 'users')),
      loginAccounts: 1000,
      tasksPerUser: Math.round(number(values['tasks-per-user'], 1_000, 'tasks-per-user')),
      // A member of 100 projects holding 100,000 tasks (their lists: one index scan per project, merged).
      projects: 100,
      projectTasks: 100_000,
      projectMembers: 10,
      // A task with as many comments as a task may hold (TASK_MAX_COMMENTS' default), read by the members.
      taskComments: 10_000,
    },
    connections: 50,
    // Quick: the targets' 13 rows (12 with bare twins), seeding and the login's 8 s in about three minutes.
    warmupSeconds: number(values.warmup, quick ? 0.5 : 5, 'warmup'),
    seconds: number(values.seconds, quick ? 2 : 15, 'seconds'),
    deepPage: 50,
    pageLimit: 20,
    uploadBytes: 1024 * 1024,
    workers: Math.round(number(values.workers, 1, 'workers')),
    everything: !quick,
    json: values.json,
    databaseUrl: values['database-url'] ?? (process.env.DATABASE_URL || undefined),
    strict: values.strict,
    only: values.only?.toLowerCase().split('|'),
  };
}
