// Debian's Chromium driven by playwright-core (no browser download): headless, no sandbox (the
// tests may run as root), nothing that reaches outside the machine.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const artifactsDir =
  process.env.ALLOT_E2E_OUT ?? resolve(import.meta.dirname, '..', '..', 'build', 'console-e2e');

export async function launchBrowser() {
  mkdirSync(artifactsDir, { recursive: true });
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
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

// A fresh browser context (its own cookies) at 1280x800, a laptop screen.
export async function newPage(browser) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  return page;
}

export async function screenshot(page, name) {
  await page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });
}

export async function logIn(page, url, user, password) {
  await page.goto(url);
  await page.fill('input[name=user]', user);
  await page.fill('input[name=password]', password);
  await page.click('button[type=submit]');
  await page.waitForSelector('[data-testid=whoami]');
}
