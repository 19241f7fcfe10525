// Faults quick enough for every run; the process-level ones are in test/stress.
import { readdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { serviceForFile } from './support/app.js';
import { expectProblem } from './support/problems.js';
import { countAttachments } from './support/rows.js';
import { createTask } from './support/tasks.js';
import { userForFile } from './support/users.js';

const service = serviceForFile();
const alice = userForFile(service);

/** Puts a plain file where a storage directory was (what a root-owned test can do to make it unwritable). */
async function breakDirectory(name: 'tmp' | 'objects'): Promise<() => Promise<void>> {
  const dir = path.join(service.ctx.config.dataDir, 'attachments', name);
  await rename(dir, `${dir}.aside`);
  await writeFile(dir, 'not a directory');
  return async () => {
    await rm(dir);
    await rename(`${dir}.aside`, dir);
  };
}

describe('an unwritable attachment directory', () => {
  for (const name of ['tmp', 'objects'] as const) {
    it(`answers an upload with a clean 500 problem and keeps no half-written state (${name}/ unwritable)`, async () => {
      const task = await createTask(service, alice);
      const restore = await breakDirectory(name);
      try {
        const res = await service.http
          .post(`/tasks/${task.id}/attachments`)
          .set('Authorization', alice.auth)
          .attach('file', Buffer.alloc(50_000, 3), { filename: 'doomed.bin', contentType: 'application/octet-stream' });
        expectProblem(res, 500, 'internal');
        expect(await countAttachments(service.ctx.db.sql, task.id)).toBe(0);
        expect(
          (await service.http.get(`/tasks/${task.id}`).set('Authorization', alice.auth).expect(200)).body.version,
        ).toBe(task.version);
      } finally {
        await restore();
      }
      expect(await readdir(path.join(service.ctx.config.dataDir, 'attachments', 'tmp'))).toEqual([]);
      // And once the directory is writable again, uploads work.
      await service.http
        .post(`/tasks/${task.id}/attachments`)
        .set('Authorization', alice.auth)
        .attach('file', Buffer.from('fine'), { filename: 'fine.txt' })
        .expect(201);
    });
  }
});
