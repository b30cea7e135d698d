// Debian's Chromium driven by playwright-core (no browser download): headless, no sandbox (the
// tests may run as root), nothing that reaches outside the machine.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { contrast } from './colour.mjs';

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

// Every piece of visible text on the page whose contrast with what is behind it (its own and its
// ancestors' background colours, composited) is under `min` (WCAG 2: 4.5:1 for body text).
// Text over an image or a gradient is left out (nothing to compute), and so are disabled
// controls (WCAG exempts them). Returns [{ text, ratio, fg, bg }].
export async function lowContrastText(page, min = 4.5) {
  const found = await page.evaluate(() => {
    const rgba = (c) => {
      const m = c.match(/rgba?\(([^)]+)\)/);
      if (!m) return null;
      const [r, g, b, a = 1] = m[1]
        .split(/[\s,/]+/)
        .filter(Boolean)
        .map(Number);
      return [r, g, b, a];
    };
    // The colour behind `el`: backgrounds up the tree until an opaque one, blended down.
    const behind = (el) => {
      const layers = [];
      for (let e = el; e; e = e.parentElement) {
        const s = getComputedStyle(e);
        if (s.backgroundImage !== 'none') return null;
        const c = rgba(s.backgroundColor);
        if (c && c[3] > 0) layers.push(c);
        if (c && c[3] >= 1) break;
      }
      let out = [255, 255, 255];
      for (const [r, g, b, a] of layers.reverse()) {
        out = [r * a + out[0] * (1 - a), g * a + out[1] * (1 - a), b * a + out[2] * (1 - a)];
      }
      return out;
    };
    const out = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const seen = new Set();
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      if (!n.textContent.trim() || !el || seen.has(el)) continue;
      seen.add(el);
      if (el.closest('option, [disabled], [aria-hidden=true]')) continue;
      // Not drawn, or moved off the page (a skip link until it has the focus).
      const box = el.getBoundingClientRect();
      if (!box.width || box.right + scrollX <= 0 || box.bottom + scrollY <= 0) continue;
      const s = getComputedStyle(el);
      if (s.visibility !== 'visible' || Number(s.opacity) === 0) continue;
      const bg = behind(el);
      const fg = rgba(s.color);
      if (!bg || !fg) continue;
      out.push({ text: n.textContent.trim().slice(0, 40), fg: fg.slice(0, 3), bg });
    }
    return out;
  });
  const css = ([r, g, b]) => `rgb(${Math.round(r)}, ${Math.round(g)}, ${Math.round(b)})`;
  return found
    .map((f) => ({ ...f, fg: css(f.fg), bg: css(f.bg), ratio: contrast(css(f.fg), css(f.bg)) }))
    .filter((f) => f.ratio < min);
}
