/**
 * A real headless Chromium for the status page's tests: the one the npm package
 * @sparticuz/chromium ships (no download at run time), driven by playwright-core, with a fresh
 * profile that talks to nothing but the pages it is sent to.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import chromium from '@sparticuz/chromium';
import { type BrowserContext, chromium as driver, type Page } from 'playwright-core';

export interface Browser {
  readonly context: BrowserContext;
  readonly page: Page;
  /** Console errors and uncaught page errors since the page opened. */
  readonly errors: string[];
  close(): Promise<void>;
}

export async function openBrowser(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'vigil-chromium-'));
  const context = await driver.launchPersistentContext(profile, {
    executablePath: await chromium.executablePath(),
    headless: true,
    args: [
      ...chromium.args,
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      '--disable-sync',
    ],
    viewport: { width: 1200, height: 900 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  return {
    context,
    page,
    errors,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
