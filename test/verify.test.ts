import { z } from 'zod';
import { contract, formatResult, verify } from '../contract/index.js';
import { tables } from '../server/db/query.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceForFile } from './support/app.js';
import { deliverOffline, type OfflineDeliveries } from './support/offline-deliveries.js';
import { countOf } from './support/rows.js';
import { isLoopback } from './support/webhook-network.js';

const served = serviceForFile({}, { listen: true });

// verify() retries its webhook's delivery once the first attempt has run. Every name resolves to a
// public address here and every connection is recorded (then refused), so a test sees where the
// service would have sent a delivery.
let offline: OfflineDeliveries;
beforeAll(() => {
  offline = deliverOffline(served.ctx);
});
afterAll(() => offline.stop());

// One verify() run calls every operation in turn and waits for its webhook's first attempt: about
// 15 s on an idle machine, several times that beside the rest of the suite.
const VERIFY_RUN_MS = 120_000;

const operationCount = Object.values(contract).reduce((count, router) => count + Object.keys(router).length, 0);

describe('verify(): the contract tests anyone can run', () => {
  it(
    'passes every operation of the contract against the service, and deletes its account',
    async () => {
      const lines: string[] = [];
      const report = await verify({ baseUrl: served.baseUrl, log: (line) => lines.push(line) });
      expect(report.results.filter((result) => !result.passed).map(formatResult)).toEqual([]);
      expect(report.passed).toBe(true);
      expect(report.results).toHaveLength(operationCount);
      expect(lines).toHaveLength(operationCount);
      expect(lines.every((line) => line.startsWith('PASS '))).toBe(true);
      expect(report.results.find((result) => result.operation === 'tasks.update')?.statuses).toEqual([412, 200]);
      const leftover = await countOf(served.ctx.db.sql, tables.selectFrom('users').where('email', 'like', 'verify-%'));
      expect(leftover).toBe(0);
    },
    VERIFY_RUN_MS,
  );

  it(
    'exercises every webhook operation without the service attempting a delivery beyond loopback (nor a DNS query)',
    async () => {
      const [lookups, connections] = [offline.lookups.length, offline.connections.length];
      const report = await verify({ baseUrl: served.baseUrl });
      const webhookResults = report.results.filter((result) => result.operation.startsWith('webhooks.'));
      expect(
        Object.fromEntries(
          webhookResults.map((result) => [result.operation, result.passed ? result.statuses : result.problems]),
        ),
      ).toEqual({
        'webhooks.create': [201],
        'webhooks.list': [200],
        'webhooks.get': [200, 404],
        'webhooks.update': [200],
        'webhooks.deliveries': [200],
        // 202: the logged attempt had run (and failed) before the retry; 404: an unknown attempt.
        'webhooks.retry': [202, 404],
        'webhooks.remove': [204],
      });
      expect(offline.connections.slice(connections).filter((connection) => !isLoopback(connection))).toEqual([]);
      expect(offline.lookups.slice(lookups)).toEqual([]);
    },
    VERIFY_RUN_MS,
  );

  it(
    'fails an operation whose answer does not match its schema or has an undeclared status',
    async () => {
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
      const failed = Object.fromEntries(
        report.results
          .filter((result) => !result.passed)
          .map((result) => [result.operation, result.problems.join('; ')]),
      );
      expect(Object.keys(failed).sort()).toEqual(['tags.list', 'tasks.get']);
      expect(failed['tags.list']).toMatch(/status 202 is not declared/);
      expect(failed['tasks.get']).toMatch(/body\.version/);
    },
    VERIFY_RUN_MS,
  );

  it('reports every operation as failed, not skipped, when the service cannot be reached', async () => {
    const report = await verify({
      baseUrl: 'http://127.0.0.1:9',
      fetch: () => Promise.reject(new TypeError('fetch failed')),
    });
    expect(report.passed).toBe(false);
    expect(report.results).toHaveLength(operationCount);
    expect(report.results.every((result) => !result.passed)).toBe(true);
  });
});
