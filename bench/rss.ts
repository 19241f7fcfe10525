// Peak resident memory of a process and its Node.js descendants (cluster workers), polled from /proc;
// not the embedded PostgreSQL's processes, which the service starts as its children too.
import { readdir, readFile, readlink, realpath } from 'node:fs/promises';

async function read(file: string): Promise<string | undefined> {
  return readFile(file, 'utf8').catch(() => undefined);
}

/** Parent of each live process, from /proc/<pid>/stat (the field after the parenthesised name). */
async function parents(): Promise<Map<number, number>> {
  const result = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await read(`/proc/${entry}/stat`);
    const ppid = stat?.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
    if (ppid) result.set(Number(entry), Number(ppid));
  }
  return result;
}

/** The process and every descendant of it. */
export async function processTree(root: number): Promise<number[]> {
  const parentOf = await parents();
  const tree = [root];
  for (let i = 0; i < tree.length; i++) {
    for (const [pid, ppid] of parentOf) if (ppid === tree[i]) tree.push(pid);
  }
  return tree;
}

async function rssKiB(pid: number): Promise<number> {
  const status = await read(`/proc/${pid}/status`);
  const match = status && /^VmRSS:\s+(\d+) kB$/m.exec(status);
  return match?.[1] ? Number(match[1]) : 0;
}

export interface RssSampler {
  /** Stops polling; the peak sum of VmRSS over the tree, in MiB. */
  stop(): Promise<number>;
}

export function sampleRss(root: number, everyMs = 200): RssSampler {
  let peakKiB = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const sizes = await Promise.all((await nodeProcesses(root)).map(rssKiB));
      peakKiB = Math.max(peakKiB, sizes.reduce((a, b) => a + b, 0));
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
  const tree = await processTree(root);
  const exes = await Promise.all(tree.map((pid) => readlink(`/proc/${pid}/exe`).catch(() => '')));
  return tree.filter((_, i) => exes[i] === node);
}
