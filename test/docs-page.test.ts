// The docs page (GET /docs) is a page a person reads: opened in headless Chromium (Debian's package),
// an operation expanded, its height within reason and its samples naming the port the page came
// from. A screenshot is kept under .test-data/screenshots/. Without /usr/bin/chromium the test is
// skipped, saying so, except in CI (CI set), where it fails.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from './support/databases.js';
import { killIfRunning, startServiceProcess, type ServiceProcess } from './support/processes.js';
import { browserTestRuns, CHROMIUM, launchChromium, SCREENSHOTS } from './support/browser.js';

describe.runIf(browserTestRuns('test/docs-page.test.ts'))('the docs page in a browser', () => {
  let database: TestDatabase;
  let service: ServiceProcess | undefined;
  let browser: BrowserContext | undefined;
  let profile: string;

  beforeAll(async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is needed: apt-get install chromium`).toBe(true);
    database = await freshDatabase();
    profile = await mkdtemp(path.join(tmpdir(), 'task-service-chromium-'));
    service = await startServiceProcess({ DATABASE_URL: database.url, DATA_DIR: path.join(profile, 'data') });
    browser = await launchChromium(path.join(profile, 'browser'), { width: 1280, height: 900 });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    killIfRunning(service);
    await service?.exited;
    await database?.drop();
    await rm(profile, { recursive: true, force: true });
  });

  it(
    'shows an expanded operation in a screen or two, with samples for the port it is served on',
    { timeout: 150_000 },
    async () => {
      if (!browser || !service) throw new Error('started in beforeAll');
      const page = await browser.newPage();
      const failures: string[] = [];
      page.on('pageerror', (error) => failures.push(error.message));
      // Only the service itself is ever asked for anything.
      await page.route('**/*', (route) =>
        route.request().url().startsWith(`${service?.url}/`) ? route.continue() : route.abort(),
      );
      await page.goto(`${service.url}/docs#/tasks/tasks.create`);
      // Swagger UI names operations by tag and operationId, the dot escaped.
      const operation = page.locator('[id="operations-tasks-tasks\\\\.create"]');
      await operation.locator('.responses-wrapper').waitFor({ timeout: 30_000 });
      const box = await operation.boundingBox();
      await mkdir(SCREENSHOTS, { recursive: true });
      // Animations stopped, and room for a machine busy with the rest of the suite: the element must
      // hold still for two frames before it is taken (a loaded CI run took more than 30 s).
      await operation.screenshot({
        path: path.join(SCREENSHOTS, 'docs-tasks-create.png'),
        animations: 'disabled',
        timeout: 60_000,
      });

      expect(box?.height).toBeGreaterThan(500);
      expect(box?.height).toBeLessThan(2_500);
      const port = new URL(service.url).port;
      const curl = await operation.locator('pre', { hasText: 'curl -X POST' }).first().innerText();
      expect(curl).toContain(`"http://127.0.0.1:${port}/tasks"`);
      expect(curl).not.toContain('localhost:3000');
      // An error answer's example is one click away, folded but there.
      const conflict = operation.locator('tr.response[data-code="409"]');
      await conflict.locator('details.folded-example > summary').click();
      await expect.poll(() => conflict.locator('pre.example').innerText()).toContain('quota_exceeded');
      expect(failures).toEqual([]);
    },
  );
});
