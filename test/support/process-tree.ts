import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { ROOT } from './processes.js';

const run = promisify(execFile);

/** Whether `pid` runs: a zombie (ended, not yet collected by its parent) does not. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return error instanceof Error && 'code' in error && error.code === 'EPERM';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).charAt(0) !== 'Z';
  } catch {
    return true; // no /proc: alive as far as can be told
  }
}

/** The PID of the embedded PostgreSQL server of a data directory, if one is alive. */
export async function postgresPid(dataDir: string): Promise<number | undefined> {
  const pidFile = await readFile(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').catch(() => undefined);
  const pid = Number(pidFile?.split('\n')[0]);
  return pid && isAlive(pid) ? pid : undefined;
}

// Linux lists each thread's children in /proc (a child belongs to the thread that forked it).
// Reading a tree's own entries costs a fraction of a `ps` of every process, and tests ask ten
// times a second while a tree runs.
const procChildren = existsSync(`/proc/${process.pid}/task/${process.pid}/children`);

/** The children of `pid` alive now, from /proc; none when it has ended meanwhile. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  let threads: string[] = [];
  try {
    threads = readdirSync(`/proc/${pid}/task`);
  } catch {
    // ended
  }
  for (const thread of threads) {
    try {
      children.push(
        ...readFileSync(`/proc/${pid}/task/${thread}/children`, 'utf8').split(' ').filter(Boolean).map(Number),
      );
    } catch {
      // the thread ended meanwhile
    }
  }
  return children;
}

/** Every descendant of `pid` alive now. */
export async function descendants(pid: number): Promise<number[]> {
  if (!procChildren) return descendantsByPs(pid);
  const found: number[] = [];
  for (let queue = [pid]; queue.length;) {
    const next = childrenOf(queue.shift() ?? 0);
    found.push(...next);
    queue.push(...next);
  }
  return found;
}

async function descendantsByPs(pid: number): Promise<number[]> {
  const { stdout } = await run('ps', ['-e', '-o', 'pid=,ppid=']);
  const children = new Map<number, number[]>();
  for (const line of stdout.trim().split('\n')) {
    const [child, parent] = line.trim().split(/\s+/).map(Number);
    if (child && parent) children.set(parent, [...(children.get(parent) ?? []), child]);
  }
  const found: number[] = [];
  for (let queue = [pid]; queue.length;) {
    const next = children.get(queue.shift() ?? 0) ?? [];
    found.push(...next);
    queue.push(...next);
  }
  return found;
}

export interface NpmStart {
  child: ChildProcess;
  pid: number;
  /** Resolves once npm has exited. */
  exited: Promise<unknown>;
  /**
   * Resolves once npm's output has ended: every process writing to it (npm and what it started,
   * which outlive npm when a signal ends it first) has exited, and what they wrote has been read.
   */
  closed: Promise<unknown>;
  /** Resolves with the first line of output matching `pattern`. */
  line(pattern: RegExp): Promise<string>;
  /** Every process of the tree seen so far (npm, node, workers, compilers). */
  seen(): Promise<number[]>;
  output(): string;
}

/** `npm start` as an operator runs it, in a process group of its own (as a terminal gives it). */
export function npmStart(env: Record<string, string>): NpmStart {
  const child = spawn('npm', ['start', '--silent'], {
    cwd: ROOT,
    detached: true,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', RATE_LIMIT_PER_MINUTE: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (!child.pid) throw new Error('npm did not start');
  const pid = child.pid;
  let output = '';
  const waiting: { pattern: RegExp; resolve: (line: string) => void }[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on('line', (line) => {
      output += `${line}\n`;
      for (const w of waiting.filter((w) => w.pattern.test(line))) {
        waiting.splice(waiting.indexOf(w), 1);
        w.resolve(line);
      }
    });
  }
  const exited = once(child, 'exit');
  const closed = once(child, 'close');
  const tree = new Set<number>([pid]);
  const watch = setInterval(
    () =>
      void descendants(pid).then(
        (pids) => pids.forEach((p) => tree.add(p)),
        () => undefined,
      ),
    100,
  );
  void exited.finally(() => clearInterval(watch));
  return {
    child,
    pid,
    exited,
    closed,
    line: (pattern) =>
      new Promise((resolve, reject) => {
        waiting.push({ pattern, resolve });
        void exited.then(() => reject(new Error(`npm start exited before printing ${pattern}: ${output}`)));
      }),
    seen: async () => {
      (await descendants(pid).catch(() => [])).forEach((p) => tree.add(p));
      return [...tree];
    },
    output: () => output,
  };
}

/** Milliseconds until `started` has exited, or the limit (then it and its group are killed). */
export async function exitWithin(started: NpmStart, limitMs: number): Promise<number> {
  const begun = Date.now();
  const timer = setTimeout(() => {
    try {
      process.kill(-started.pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }, limitMs);
  await started.exited;
  clearTimeout(timer);
  return Date.now() - begun;
}
