import { z } from 'zod';
import { contract, formatResult, verify } from '../contract/index.js';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useWebhookNetwork } from '../server/webhooks/network.js';
import { startDeliveryWorker } from '../server/webhooks/worker.js';
import { listeningForFile } from './support/listening.js';

const served = listeningForFile();

// verify() retries its webhook's delivery once the first attempt has failed: a delivery worker runs,
// and its connector refuses at once, so no attempt leaves this machine.
let stopWorker = () => Promise.resolve();
beforeAll(() => {
  useWebhookNetwork(served.service.ctx, {
    resolve: () => Promise.resolve([]),
    connect: () => {
      const socket = new PassThrough();
      setImmediate(() => socket.destroy(new Error('connection refused (test connector)')));
      return socket;
    },
    ownAddresses: () => new Set(),
  });
  stopWorker = startDeliveryWorker(served.service.ctx);
});
afterAll(() => stopWorker());

const operationCount = Object.values(contract).reduce((count, router) => count + Object.keys(router).length, 0);

describe('verify(): the contract tests anyone can run', () => {
  it('passes every operation of the contract against the service, and deletes its account', async () => {
    const lines: string[] = [];
    const report = await verify({ baseUrl: served.baseUrl, log: (line) => lines.push(line) });
    expect(report.results.filter((result) => !result.passed).map(formatResult)).toEqual([]);
    expect(report.passed).toBe(true);
    expect(report.results).toHaveLength(operationCount);
    expect(lines).toHaveLength(operationCount);
    expect(lines.every((line) => line.startsWith('PASS '))).toBe(true);
    expect(report.results.find((result) => result.operation === 'tasks.update')?.statuses).toEqual([412, 200]);
    const leftover = await served.service.ctx.db.prisma.user.count({ where: { email: { startsWith: 'verify-' } } });
    expect(leftover).toBe(0);
  });

  it('fails an operation whose answer does not match its schema or has an undeclared status', async () => {
    // A service that has drifted from the contract: tasks lose their version, tags answer 202.
    const drifted: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      const url = new URL(String(input));
      if (url.pathname === '/tags' && init?.method === 'GET') return new Response(null, { status: 202 });
      if (/^\/tasks\/[^/]+$/.test(url.pathname) && (init?.method ?? 'GET') === 'GET' && response.status === 200) {
        const task = z.record(z.unknown()).parse(await response.json());
        delete task.version;
        return new Response(JSON.stringify(task), { status: 200, headers: response.headers });
      }
      return response;
    };
    const report = await verify({ baseUrl: served.baseUrl, fetch: drifted });
    expect(report.passed).toBe(false);
    const failed = Object.fromEntries(report.results.filter((result) => !result.passed).map((result) => [result.operation, result.problems.join('; ')]));
    expect(Object.keys(failed).sort()).toEqual(['tags.list', 'tasks.get']);
    expect(failed['tags.list']).toMatch(/status 202 is not declared/);
    expect(failed['tasks.get']).toMatch(/body\.version/);
  });

  it('reports every operation as failed, not skipped, when the service cannot be reached', async () => {
    const report = await verify({ baseUrl: 'http://127.0.0.1:9', fetch: () => Promise.reject(new TypeError('fetch failed')) });
    expect(report.passed).toBe(false);
    expect(report.results).toHaveLength(operationCount);
    expect(report.results.every((result) => !result.passed)).toBe(true);
  });
});
