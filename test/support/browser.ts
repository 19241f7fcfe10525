// Pages a person uses, opened in Debian's headless Chromium through playwright-core (which
// downloads nothing). Without /usr/bin/chromium such a test is skipped, saying so, except in CI
// (CI set), where it fails.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
/** Where the tests keep their screenshots. */
export const SCREENSHOTS = path.resolve(import.meta.dirname, '..', '..', '.test-data', 'screenshots');

/** Whether a browser test of `file` runs here; says why when it does not. */
export function browserTestRuns(file: string): boolean {
  const available = existsSync(CHROMIUM);
  if (!available && !process.env.CI)
    console.warn(`${file} skipped: no ${CHROMIUM} (Debian: apt-get install chromium); in CI it fails`);
  return available || Boolean(process.env.CI);
}

/** Chromium on a fresh profile in `profileDir`, with nothing that reaches beyond this machine of its own accord. */
export function launchChromium(
  profileDir: string,
  viewport: { width: number; height: number },
): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
