// postmaster.pid is the lock file PostgreSQL keeps in its data directory while it runs (and
// .s.PGSQL.<port>.lock beside its socket). After a crash or a power cut they stay behind, naming a
// PID that may then be a zombie (the killed server, not yet reaped) or, after a reboot, any other
// process. Only a live PostgreSQL of this very data directory counts as its server.
import { execFile } from 'node:child_process';
import { readFile, realpath, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface PidFile {
  pid: number;
  /** Line 5: the directory of the server's Unix socket. */
  socketDir: string | undefined;
  /** Line 8: `ready` once the server takes connections. */
  ready: boolean;
}

function parse(text: string): PidFile {
  const lines = text.split('\n');
  // A single-user backend writes its PID negated.
  const pid = Math.abs(Number(lines[0]));
  return {
    pid: Number.isSafeInteger(pid) ? pid : 0,
    socketDir: lines[4]?.trim() || undefined,
    ready: lines[7]?.trim() === 'ready',
  };
}

export async function readPidFile(pgData: string): Promise<PidFile | undefined> {
  const text = await readFile(path.join(pgData, 'postmaster.pid'), 'utf8').catch(() => undefined);
  return text === undefined ? undefined : parse(text);
}

export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another account.
    return error instanceof Error && 'code' in error && error.code === 'EPERM';
  }
}

interface ProcessFacts {
  zombie: boolean;
  /** Its working directory, when readable (a postmaster's is its data directory). */
  directory?: string;
  /** Its arguments, exactly (Linux). */
  args?: string[];
  /** Its command line as ps shows it, arguments joined by spaces (elsewhere). */
  commandLine?: string;
}

/** On Linux, from /proc: the state, the working directory and the arguments. */
async function procFacts(pid: number): Promise<ProcessFacts | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (stat === undefined) return undefined;
  // "pid (name) S …": the state follows the last ')', as the name may hold anything.
  const state = stat.slice(stat.lastIndexOf(')') + 2).charAt(0);
  const directory = await realpath(`/proc/${pid}/cwd`).catch(() => undefined);
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  return { zombie: state === 'Z' || state === 'X', directory, args: cmdline.split('\0').filter(Boolean) };
}

/** Elsewhere (macOS, the BSDs), from ps: the state and the command line. */
async function psFacts(pid: number): Promise<ProcessFacts | undefined> {
  try {
    const { stdout } = await run('ps', ['-o', 'stat=', '-o', 'command=', '-p', String(pid)]);
    const [, state = '', commandLine = ''] = /^\s*(\S+)\s+(.*)$/.exec(stdout.trim()) ?? [];
    return { zombie: state.startsWith('Z'), commandLine };
  } catch {
    return undefined;
  }
}

/** The data directory a `postgres -D DIR` command line names, if it names one. */
function namedDataDir(args: string[]): string | undefined {
  const at = args.indexOf('-D');
  if (at >= 0) return args[at + 1];
  return args.find((arg) => arg.startsWith('-D') && arg.length > 2)?.slice(2);
}

const canonical = (file: string) => realpath(file).catch(() => path.resolve(file));

/** Whether a PostgreSQL server answers on the socket in `socketDir` (the data directory's own). */
function socketAnswers(socketDir: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ path: path.join(socketDir, `.s.PGSQL.${port}`) });
    const done = (answers: boolean) => {
      socket.destroy();
      resolve(answers);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * Whether `pid` is a running PostgreSQL server of `pgData`: alive, not a zombie, and working in
 * that data directory (Linux) or started on it (elsewhere). When the process tells nothing of
 * that, the data directory's own socket decides.
 */
export async function isServerOf(
  pgData: string,
  pid: number,
  socket: { dir: string | undefined; port: number },
): Promise<boolean> {
  if (!(pid > 0 && processExists(pid))) return false;
  const facts = (await procFacts(pid)) ?? (await psFacts(pid));
  if (facts?.zombie) return false;
  const home = await canonical(pgData);
  if (facts?.directory !== undefined) return facts.directory === home;
  const [program, ...args] = facts?.args ?? [];
  if (program !== undefined) {
    if (!/^(?:postgres|postmaster)$/.test(path.basename(program))) return false;
    const named = namedDataDir(args);
    if (named !== undefined) return (await canonical(named)) === home;
  } else if (facts?.commandLine) {
    // Arguments joined by spaces cannot be split back (a path may hold spaces): look for ours.
    if ([pgData, home].some((dir) => facts.commandLine?.includes(` -D ${dir}`))) return true;
    if (!/postgres|postmaster/.test(facts.commandLine)) return false;
  }
  return socket.dir !== undefined && socketAnswers(socket.dir, socket.port);
}

/**
 * Removes lock files whose PID is not a running server of `pgData` (postmaster.pid, and the
 * socket's in each of `socketDirs`), so that PostgreSQL starts: it takes a live PID for a running
 * server. A file that changed meanwhile (a server started a moment ago) is left alone.
 */
export async function removeStaleLockFiles(pgData: string, socketDirs: string[], port: number): Promise<void> {
  const dirs = [...new Set(socketDirs)];
  const files = [path.join(pgData, 'postmaster.pid'), ...dirs.map((dir) => path.join(dir, `.s.PGSQL.${port}.lock`))];
  for (const file of files) {
    const text = await readFile(file, 'utf8').catch(() => undefined);
    if (text === undefined) continue;
    const { pid, socketDir } = parse(text);
    if (await isServerOf(pgData, pid, { dir: socketDir ?? path.dirname(file), port })) continue;
    if ((await readFile(file, 'utf8').catch(() => undefined)) === text) await rm(file, { force: true });
  }
}
