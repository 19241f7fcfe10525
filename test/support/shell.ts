import { spawn } from 'node:child_process';

// Shell samples (README, docs/, the docs page) run as a reader runs them: in bash, with real curl.

/**
 * Put before a sample: each curl also writes `HTTP-STATUS <code>` on standard error (000 when
 * nothing answered), and gives up after CURL_MAX_TIME seconds, 30 unless the script sets it (a live
 * stream never ends by itself: its sample sets a few seconds). No `set -e`: a sample runs as it would
 * in a reader's shell.
 */
export const CURL_STATUS_PRELUDE = `curl() { command curl --max-time "\${CURL_MAX_TIME:-30}" --write-out '%{stderr}HTTP-STATUS %{http_code}\\n' "$@"; }
`;

export interface ShellRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The status of every curl the script ran, in order (with CURL_STATUS_PRELUDE). */
  statuses: number[];
}

/** `bash -c script` in `cwd`, with `env` added to this process's environment; killed after `timeoutMs`. */
export function bash(
  script: string,
  cwd: string,
  env: Record<string, string> = {},
  timeoutMs = 60_000,
): Promise<ShellRun> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      const statuses = [...stderr.matchAll(/^HTTP-STATUS (\d+)$/gm)].map((match) => Number(match[1]));
      resolve({ code, stdout, stderr, statuses });
    });
  });
}
