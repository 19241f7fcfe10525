// The authorization endpoint's sign-in and consent pages in a real browser (Debian's headless
// Chromium): signing in from the keyboard, a wrong password, approving and denying, with the
// redirect landing on a loopback callback. A screenshot of each step is kept under
// .test-data/screenshots/. Without /usr/bin/chromium the test is skipped, saying so, except in CI.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authorizationUrl, oauthServiceForFile, pkcePair, registerClient } from './support/oauth.js';
import { registerUser, type TestUser } from './support/users.js';
import { browserTestRuns, CHROMIUM, launchChromium, SCREENSHOTS } from './support/browser.js';

describe.runIf(browserTestRuns('test/oauth-consent-page.test.ts'))('the sign-in and consent pages in a browser', () => {
  const served = oauthServiceForFile();
  let browser: BrowserContext | undefined;
  let profile: string;
  let callback: Server;
  let callbackUrl: string;
  let user: TestUser;
  let clientId: string;

  beforeAll(async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is needed: apt-get install chromium`).toBe(true);
    // The app's redirect URI: a page on loopback that says it got the answer.
    callback = createServer((_req, res) =>
      res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>Back in the app</h1>'),
    );
    callback.listen(0, '127.0.0.1');
    await once(callback, 'listening');
    const address = callback.address();
    if (address === null || typeof address === 'string') throw new Error('expected a TCP address');
    callbackUrl = `http://127.0.0.1:${address.port}/callback`;
    user = await registerUser(served.service, { name: 'Ada Lovelace' });
    clientId = (await registerClient(served.baseUrl, { client_name: 'Claude', redirect_uris: [callbackUrl] }))
      .client_id;
    profile = await mkdtemp(path.join(tmpdir(), 'task-service-chromium-'));
    await mkdir(SCREENSHOTS, { recursive: true });
    browser = await launchChromium(path.join(profile, 'browser'), { width: 900, height: 800 });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    callback?.close();
    await rm(profile, { recursive: true, force: true });
  });

  /** A page that may ask only the service and the callback for anything; what it asked is recorded. */
  async function openPage(): Promise<{ page: Page; asked: string[]; failures: string[] }> {
    if (!browser) throw new Error('started in beforeAll');
    const page = await browser.newPage();
    const asked: string[] = [];
    const failures: string[] = [];
    page.on('pageerror', (error) => failures.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') failures.push(message.text());
    });
    await page.route('**/*', (route) => {
      const url = route.request().url();
      asked.push(url);
      return url.startsWith(`${served.baseUrl}/`) || url.startsWith(callbackUrl) ? route.continue() : route.abort();
    });
    return { page, asked, failures };
  }

  const shot = (page: Page, name: string) =>
    page.screenshot({ path: path.join(SCREENSHOTS, `oauth-${name}.png`), fullPage: true });

  async function signIn(page: Page, password: string): Promise<void> {
    // From the keyboard: the fields are labelled, Enter submits.
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill(password);
    await page.keyboard.press('Enter');
    await page.waitForLoadState('load');
  }

  it(
    'signs in, shows what the app asks for in words, and approving lands on the app with code, state and iss',
    { timeout: 60_000 },
    async () => {
      const { page, asked, failures } = await openPage();
      const url = authorizationUrl(served.baseUrl, {
        clientId,
        redirectUri: callbackUrl,
        challenge: pkcePair().challenge,
        scope: 'tasks:write tags:read admin',
        resource: `${served.baseUrl}/mcp`,
        state: 'from-the-browser',
      });
      const first = await page.goto(url);
      const csp = first?.headers()['content-security-policy'] ?? '';
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("default-src 'none'");
      expect(csp).not.toContain('unsafe-inline');
      await expect.poll(() => page.getByRole('heading', { level: 1 }).innerText()).toBe('Sign in to connect Claude');
      await shot(page, '1-sign-in');

      await signIn(page, 'not the password');
      await expect.poll(() => page.getByRole('alert').innerText()).toContain('The email or the password is wrong');
      expect(await page.getByLabel('Email').getAttribute('aria-describedby')).toBe('form-error');
      await shot(page, '2-wrong-password');

      await signIn(page, user.password);
      await expect
        .poll(() => page.getByRole('heading', { level: 1 }).innerText())
        .toBe('Allow Claude to use your account?');
      const text = await page.locator('main').innerText();
      expect(text).toContain('Signed in as Ada Lovelace');
      expect(text).toContain('Create, change and delete tasks');
      expect(text).toContain('Read tags');
      expect(text).toContain('administrator powers, which your account does not have');
      expect(text).toContain('127.0.0.1');
      expect(text).toContain('Only through the MCP endpoint');
      await shot(page, '3-consent');

      await page.getByRole('button', { name: 'Allow' }).focus();
      await Promise.all([
        page.waitForURL((target) => target.href.startsWith(callbackUrl)),
        page.keyboard.press('Enter'),
      ]);
      const landed = new URL(page.url());
      expect(landed.searchParams.get('code')).toEqual(expect.any(String));
      expect(landed.searchParams.get('state')).toBe('from-the-browser');
      expect(landed.searchParams.get('iss')).toBe(served.baseUrl);
      await shot(page, '4-approved');
      // Nothing but the service and the app's callback was asked for anything.
      expect(asked.every((asked) => asked.startsWith(`${served.baseUrl}/`) || asked.startsWith(callbackUrl))).toBe(
        true,
      );
      expect(failures).toEqual([]);
      await page.close();
    },
  );

  it('denying lands on the app with error=access_denied and no code', { timeout: 60_000 }, async () => {
    const { page, failures } = await openPage();
    await page.goto(
      authorizationUrl(served.baseUrl, { clientId, redirectUri: callbackUrl, challenge: pkcePair().challenge }),
    );
    await signIn(page, user.password);
    await expect
      .poll(() => page.getByRole('heading', { level: 1 }).innerText())
      .toBe('Allow Claude to use your account?');
    expect(await page.locator('#scopes').innerText()).toContain('tasks:read');
    await Promise.all([
      page.waitForURL((target) => target.href.startsWith(callbackUrl)),
      page.getByRole('button', { name: 'Deny' }).click(),
    ]);
    const landed = new URL(page.url());
    expect(landed.searchParams.get('error')).toBe('access_denied');
    expect(landed.searchParams.has('code')).toBe(false);
    await shot(page, '5-denied');
    expect(failures).toEqual([]);
    await page.close();
  });

  it('shows an unknown app as a page, never a redirect', { timeout: 60_000 }, async () => {
    const { page } = await openPage();
    const res = await page.goto(
      authorizationUrl(served.baseUrl, {
        clientId,
        redirectUri: `${callbackUrl}/elsewhere`,
        challenge: pkcePair().challenge,
      }),
    );
    expect(res?.status()).toBe(400);
    expect(page.url().startsWith(served.baseUrl)).toBe(true);
    expect(await page.getByRole('heading', { level: 1 }).innerText()).toBe('Unregistered return address');
    await shot(page, '6-unregistered-redirect');
    await page.close();
  });
});
