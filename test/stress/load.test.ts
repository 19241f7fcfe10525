// Sustained mixed load: reads, writes, uploads and logins for LOAD_SECONDS on loopback;
// zero errors, and the process's memory flat after warm-up (within 10%).
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthResultSchema } from '../../contract/auth.js';
import { TaskSchema } from '../../contract/tasks.js';
import { freshDatabase, type TestDatabase } from '../support/databases.js';
import { killIfRunning, startServiceProcess, type ServiceProcess } from '../support/processes.js';

const SECONDS = Number(process.env.LOAD_SECONDS ?? 90);
const CONCURRENCY = 8;

let database: TestDatabase;
let dataDir: string;
let service: ServiceProcess | undefined;
beforeAll(async () => {
  database = await freshDatabase();
  dataDir = await mkdtemp(path.join(tmpdir(), 'task-service-load-'));
  service = await startServiceProcess({ DATABASE_URL: database.url, DATA_DIR: dataDir });
}, 60_000);
afterAll(async () => {
  killIfRunning(service);
  await database.drop();
  await rm(dataDir, { recursive: true, force: true });
});

async function rssKiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

// The lowest RSS of a window: what is left after collections, so garbage not yet collected does not count.
const floor = (values: number[]) => Math.min(...values);

describe('sustained mixed load', () => {
  it(
    `serves ${SECONDS} s of reads, writes, uploads and logins with no error and flat memory`,
    async () => {
      const url = service?.url ?? '';
      const pid = service?.child.pid ?? 0;
      const email = `load-${Date.now()}@example.test`;
      const password = 'correct horse battery';
      const registered = await fetch(`${url}/auth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password, name: 'Load' }),
      });
      const auth = `Bearer ${AuthResultSchema.parse(await registered.json()).accessToken}`;
      const json = { authorization: auth, 'content-type': 'application/json' };

      const counts = { requests: 0, errors: 0 };
      const errors: string[] = [];
      const expectStatus = async (res: Response, status: number, what: string) => {
        counts.requests++;
        if (res.status !== status) {
          counts.errors++;
          if (errors.length < 10) errors.push(`${what}: ${res.status} ${(await res.text()).slice(0, 200)}`);
        }
        return res;
      };
      const ids: string[] = [];
      const step = async (i: number) => {
        switch (i % 20) {
          case 0:
            await expectStatus(
              await fetch(`${url}/auth/login`, {
                method: 'POST',
                headers: { 'content-type': 'application/json' },
                body: JSON.stringify({ email, password }),
              }),
              200,
              'login',
            );
            return;
          case 1: {
            const id = ids[i % Math.max(ids.length, 1)];
            if (!id) return;
            const form = new FormData();
            form.append('file', new Blob([new Uint8Array(20_000).fill(i % 256)]), 'load.bin');
            const res = await expectStatus(
              await fetch(`${url}/tasks/${id}/attachments`, {
                method: 'POST',
                headers: { authorization: auth },
                body: form,
              }),
              201,
              'upload',
            );
            const attachment = (await res.json()) as { id: string };
            await expectStatus(
              await fetch(`${url}/attachments/${attachment.id}`, {
                method: 'DELETE',
                headers: { authorization: auth },
              }),
              204,
              'delete attachment',
            );
            return;
          }
          case 2:
          case 3:
          case 4: {
            const res = await expectStatus(
              await fetch(`${url}/tasks`, {
                method: 'POST',
                headers: json,
                body: JSON.stringify({ title: `load ${i}`, description: 'x'.repeat(i % 500) }),
              }),
              201,
              'create',
            );
            const task = TaskSchema.parse(await res.json());
            if (ids.length < 200) ids.push(task.id);
            else
              await expectStatus(
                await fetch(`${url}/tasks/${task.id}`, { method: 'DELETE', headers: { authorization: auth } }),
                204,
                'delete',
              );
            return;
          }
          case 5:
          case 6: {
            const id = ids[i % Math.max(ids.length, 1)];
            if (!id) return;
            await expectStatus(
              await fetch(`${url}/tasks/${id}`, {
                method: 'PATCH',
                headers: { ...json, 'content-type': 'application/merge-patch+json' },
                body: JSON.stringify({ status: i % 2 ? 'done' : 'todo' }),
              }),
              200,
              'update',
            );
            return;
          }
          case 7:
            await expectStatus(
              await fetch(`${url}/tasks?q=load%20${i % 100}&limit=10`, { headers: { authorization: auth } }),
              200,
              'search',
            );
            return;
          default: {
            const res = await fetch(`${url}/tasks?limit=20&sort=${i % 3 ? '-createdAt' : 'title'}`, {
              headers: { authorization: auth },
            });
            await expectStatus(res, 200, 'list');
            await res.arrayBuffer();
          }
        }
      };

      const samples: { at: number; kib: number }[] = [];
      const begun = Date.now();
      const end = begun + SECONDS * 1000;
      const sampler = setInterval(() => {
        void rssKiB(pid).then((kib) => samples.push({ at: Date.now() - begun, kib }));
      }, 1000);
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (Date.now() < end) await step(next++);
        }),
      );
      clearInterval(sampler);

      const window = (from: number, to: number) =>
        samples.filter((s) => s.at >= from * SECONDS * 1000 && s.at < to * SECONDS * 1000).map((s) => s.kib);
      const warm = floor(window(0.3, 0.5));
      const last = floor(window(0.8, 1));
      console.log(
        `load: ${counts.requests} requests in ${SECONDS} s (${Math.round(counts.requests / SECONDS)}/s), ${counts.errors} errors; ` +
          `RSS after warm-up ${Math.round(warm / 1024)} MiB, at the end ${Math.round(last / 1024)} MiB (${(((last - warm) / warm) * 100).toFixed(1)}%)`,
      );
      expect(errors).toEqual([]);
      expect(last).toBeLessThanOrEqual(warm * 1.1);
    },
    (SECONDS + 60) * 1000,
  );
});
