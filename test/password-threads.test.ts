import { readdirSync, readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { startHashingThreads } from '../server/security/hashing-threads.js';
import { passwordHasher, type PasswordHasher } from '../server/security/passwords.js';

const HashedSchema = z.object({ hash: z.string() });

// The service's own argon2 cost (the configuration's defaults), two threads as on a two-core machine.
const CONFIG = { memoryCost: 19456, timeCost: 2, concurrency: 2 };

/** The ids of this process's threads running at `nice`: proc(5)'s field 19 of /proc/self/task/<tid>/stat. */
function threadsAtNice(nice: number): Set<string> {
  const found = new Set<string>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      // After the command name's closing parenthesis: field 3 (state) onwards, so field 19 is the 17th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[16]) === nice) found.add(tid);
    } catch {
      // The thread ended meanwhile.
    }
  }
  return found;
}

// No database here: once per run, not once per database project.
describe.runIf(process.env.TEST_DB === 'embedded')('password hashing threads', () => {
  const opened: PasswordHasher[] = [];
  const hasher = (concurrency = CONFIG.concurrency) => {
    const made = passwordHasher({ ...CONFIG, concurrency });
    opened.push(made);
    return made;
  };
  afterEach(async () => {
    vi.restoreAllMocks();
    await Promise.all(opened.splice(0).map((made) => made.close()));
  });

  it('verifies what it hashed; a wrong password and a malformed hash answer false', async () => {
    const passwords = hasher();
    const stored = await passwords.hash('correct horse battery');
    expect(stored).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    await expect(passwords.verify(stored, 'correct horse battery')).resolves.toBe(true);
    await expect(passwords.verify(stored, 'wrong horse battery')).resolves.toBe(false);
    await expect(passwords.verify('not a hash', 'correct horse battery')).resolves.toBe(false);
    await expect(passwords.verify('$argon2id$v=19$m=19456,t=2,p=1$broken', 'correct horse battery')).resolves.toBe(
      false,
    );
    await expect(passwords.burn('anything')).resolves.toBeUndefined();
  });

  it.runIf(process.platform === 'linux')(
    'runs argon2 on `concurrency` threads of this process at nice 10, no more',
    async () => {
      const before = threadsAtNice(10);
      const passwords = hasher();
      const stored = await passwords.hash('correct horse battery');
      const checks = Array.from({ length: 2 * CONFIG.concurrency + 1 }, () =>
        passwords.verify(stored, 'correct horse battery'),
      );
      expect(await Promise.all(checks)).toEqual(checks.map(() => true));
      expect([...threadsAtNice(10)].filter((tid) => !before.has(tid))).toHaveLength(CONFIG.concurrency);
      // The event loop's thread (tid = pid) keeps its normal priority.
      expect(threadsAtNice(10).has(String(process.pid))).toBe(false);
    },
  );

  it('answers every one of more concurrent verifications than threads, each correctly (they queue)', async () => {
    const passwords = hasher();
    const [right, other] = await Promise.all([passwords.hash('right password'), passwords.hash('other password')]);
    const cases = Array.from({ length: 12 }, (_, i) => ({
      stored: i % 2 ? right : other,
      password: i % 3 ? 'right password' : 'other password',
    }));
    const answers = await Promise.all(cases.map(({ stored, password }) => passwords.verify(stored, password)));
    expect(answers).toEqual(
      cases.map(({ stored, password }) => (stored === right) === (password === 'right password')),
    );
  });

  it('hands each thread its next job while it runs one, so a busy event loop does not leave it idle', async () => {
    const threads = startHashingThreads(CONFIG.concurrency, {
      memoryCost: CONFIG.memoryCost,
      timeCost: CONFIG.timeCost,
    });
    try {
      const jobs = Array.from({ length: 2 * CONFIG.concurrency + 1 }, () =>
        threads.run({ op: 'hash', password: 'correct horse battery' }, HashedSchema),
      );
      // Two jobs on each thread (the running one and the next, already in its port): one waits here.
      expect(threads.waiting()).toBe(1);
      await Promise.all(jobs);
      expect(threads.waiting()).toBe(0);
    } finally {
      await threads.close();
    }
  });

  it('rejects the job of a thread that dies, and goes on with a new thread', async () => {
    const passwords = hasher(1);
    const stored = await passwords.hash('correct horse battery');
    // The next job's thread is ended instead of being given the job: as a crash, seen from here.
    vi.spyOn(Worker.prototype, 'postMessage').mockImplementationOnce(function (this: Worker) {
      void this.terminate();
    });
    await expect(passwords.verify(stored, 'correct horse battery')).rejects.toThrow(/exited/);
    await expect(passwords.verify(stored, 'correct horse battery')).resolves.toBe(true);
  });

  it('makes the dummy hash again when its thread was lost, so unknown emails do not fail from then on', async () => {
    // The first job (the dummy hash, made at once) goes to a thread that dies.
    vi.spyOn(Worker.prototype, 'postMessage').mockImplementationOnce(function (this: Worker) {
      void this.terminate();
    });
    const passwords = hasher(1);
    await expect(passwords.burn('any password')).rejects.toThrow(/exited/);
    await expect(passwords.burn('any password')).resolves.toBeUndefined();
  });

  it('rejects what is waiting or asked once closed', async () => {
    const passwords = hasher();
    const waiting = Array.from({ length: 4 }, () =>
      passwords.hash('some password').then(
        () => 'hashed',
        (error: unknown) => error,
      ),
    );
    await passwords.close();
    for (const outcome of await Promise.all(waiting)) expect(outcome).toBeInstanceOf(Error);
    await expect(passwords.verify('$argon2id$', 'x')).rejects.toThrow(/closed/);
  });
});
