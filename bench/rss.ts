// Peak resident memory of a process and its Node.js descendants (cluster workers), polled from /proc;
// not the embedded PostgreSQL's processes, which the service starts as its children too.
// Reads are synchronous: /proc answers from memory, and an asynchronous read costs a thread-pool
// round trip each, on cores the sampler shares with what it measures.
import { readdirSync, readFileSync } from 'node:fs';
import { readlink, realpath } from 'node:fs/promises';

function read(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** Parent of each live process, from /proc/<pid>/stat (the field after the parenthesised name). */
function parents(): Map<number, number> {
  const result = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = read(`/proc/${entry}/stat`);
    const ppid = stat?.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
    if (ppid) result.set(Number(entry), Number(ppid));
  }
  return result;
}

/** The process and every descendant of it. */
export function processTree(root: number): number[] {
  const parentOf = parents();
  const tree = [root];
  for (let i = 0; i < tree.length; i++) {
    for (const [pid, ppid] of parentOf) if (ppid === tree[i]) tree.push(pid);
  }
  return tree;
}

/** VmRSS of a process in KiB; 0 once it has exited. */
function rssKiB(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(read(`/proc/${pid}/status`) ?? '');
  return match?.[1] ? Number(match[1]) : 0;
}

/** Clock ticks a second of /proc/<pid>/stat's CPU times (USER_HZ: 100 on every Linux this runs on). */
const TICKS_PER_SECOND = 100;

/** CPU seconds (user and system) a process has used so far; 0 once it has exited. */
function cpuSecondsOf(pid: number): number {
  const stat = read(`/proc/${pid}/stat`);
  const fields = stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the name: state is field 3, utime 14 and stime 15.
  return fields ? (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND : 0;
}

/** CPU seconds used so far by the Node.js processes of the tree. */
export async function cpuSeconds(root: number): Promise<number> {
  return (await nodeProcesses(root)).reduce((sum, pid) => sum + cpuSecondsOf(pid), 0);
}

/** VmRSS of a process now, in MiB; 0 once it has exited. */
export const rssMiB = (pid: number): number => rssKiB(pid) / 1024;

export interface RssSampler {
  /** Stops polling; the peak sum of VmRSS over the tree, in MiB. */
  stop(): Promise<number>;
}

/**
 * Polls the tree's Node.js processes for their resident memory. The sampler shares the cores with
 * what it measures (a login storm leaves nothing spare): the tree is walked once a second, not at
 * every sample, and each sample reads one small file per process.
 */
export function sampleRss(root: number, everyMs = 200, treeEveryMs = 1000): RssSampler {
  let peakKiB = 0;
  let running = true;
  const loop = (async () => {
    let pids: number[] = [];
    let treeAt = 0;
    while (running) {
      if (Date.now() - treeAt >= treeEveryMs) {
        pids = await nodeProcesses(root);
        treeAt = Date.now();
      }
      peakKiB = Math.max(
        peakKiB,
        pids.reduce((sum, pid) => sum + rssKiB(pid), 0),
      );
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return peakKiB / 1024;
    },
  };
}

/** The processes of the tree that run this Node.js binary: the service and its cluster workers. */
export async function nodeProcesses(root: number): Promise<number[]> {
  const node = await realpath(process.execPath);
  const tree = processTree(root);
  const exes = await Promise.all(tree.map((pid) => readlink(`/proc/${pid}/exe`).catch(() => '')));
  return tree.filter((_, i) => exes[i] === node);
}
