// End to end: the console in Debian's Chromium against a real allotd and agent. A member logs in,
// launches a job from the form, sees it on the map and in My work, follows its log and its GPUs'
// utilisation, holds, releases, requeues and cancels work; the map names GPU models, who holds a
// GPU and how many jobs wait, in team colours checked for contrast and distinctness; a member of
// another team sees none of it; a host's page charts its GPUs; draining a host with a deadline
// and approving a lease list the work they would stop before they do anything; the admin page
// is in tabs and its audit log reads as sentences; the dark theme follows the system and keeps
// text readable; the usage chart renders; a session that ends sends the browser back to the
// login page; a member starts a Jupyter session, sees it run and stops it; a session link opened
// with no login goes through the login page to the notebook tree, where a new notebook runs a
// cell. Screenshots land in the artifacts directory.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Cluster, waitFor } from './cluster.mjs';
import { launchBrowser, logIn, lowContrastText, newPage, screenshot } from './browser.mjs';
import { contrast, deltaE2000 } from './colour.mjs';

const PASSWORD = 'console-test-password';
let cluster;
let browser;
const apiTokens = new Map();

// An API token of `user`'s, for work the test submits outside the browser.
async function tokenOf(user) {
  if (!apiTokens.has(user)) {
    const res = await fetch(`${cluster.url}/api/v1/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ user, password: PASSWORD }),
    });
    apiTokens.set(user, (await res.json()).token);
  }
  return apiTokens.get(user);
}

const aliceToken = () => tokenOf('alice');

// A queued job of alice's that no host can run (64 GPUs), which stays queued until cancelled.
async function queuedJob(name) {
  return cluster.api(
    'POST',
    '/jobs',
    { team: 'ml', command: ['sleep', '60'], gpus: 64, queue_anyway: true, name },
    await aliceToken(),
  );
}

// A one-GPU job of alice's, submitted outside the browser, once it runs.
async function runningJob(name) {
  const job = await cluster.api(
    'POST',
    '/jobs',
    { team: 'ml', command: ['sleep', '120'], gpus: 1, name },
    await aliceToken(),
  );
  await waitFor(
    'the job running',
    async () =>
      (await cluster.api('GET', `/jobs/${job.id}`, undefined, await aliceToken())).state ===
      'running',
  );
  return job;
}

// The computed base colour of the element (its background-color: a GPU cell's team colour lies
// under its utilisation gradient) and of the card it sits on.
async function cellColours(page, selector) {
  return page.$eval(selector, (el) => ({
    cell: getComputedStyle(el).backgroundColor,
    card: getComputedStyle(el.closest('.hostcard')).backgroundColor,
  }));
}

// Fails naming every piece of text under 4.5:1 on the page as it is now.
async function assertReadable(page, where) {
  const low = await lowContrastText(page);
  assert.deepEqual(
    low.map((l) => `${l.text}: ${l.fg} on ${l.bg} is ${l.ratio.toFixed(2)}:1`),
    [],
    `text under 4.5:1 on ${where}`,
  );
}

// The admin logs in to the console with a password, set once (a second change of one's own
// password needs the current one).
let adminHasPassword = false;
async function giveAdminAPassword() {
  if (adminHasPassword) return;
  await cluster.api('PUT', '/users/admin/password', { password: PASSWORD });
  adminHasPassword = true;
}

before(async () => {
  cluster = await new Cluster().start();
  await cluster.createTeam('ml');
  await cluster.createTeam('cv');
  await cluster.createUser('alice', { ml: 'member' }, PASSWORD);
  await cluster.createUser('bob', { cv: 'member' }, PASSWORD);
  // Team cv's own host: nobody else may see it.
  await cluster.addAgent('cv-only', 'sim:2xA100');
  await cluster.api('PUT', '/hosts/cv-only/dedication', { team: 'cv' });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  const failed = process.exitCode && process.exitCode !== 0;
  if (failed) {
    console.log('--- allotd log ---\n' + cluster?.log('allotd').slice(-4000));
  }
  await cluster?.stop();
});

describe('console', () => {
  let alice;
  let jobId;

  test('serves the console with security headers and compressed assets', async () => {
    const res = await fetch(`${cluster.url}/`, { headers: { 'Accept-Encoding': 'gzip' } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /text\/html/);
    assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'self'/);
    const html = await res.text();
    const script = html.match(/src="(\/assets\/[^"]+\.js)"/)?.[1];
    assert.ok(script, 'index.html names its script');
    const js = await fetch(`${cluster.url}${script}`, { headers: { 'Accept-Encoding': 'gzip' } });
    assert.equal(js.status, 200);
    assert.equal(js.headers.get('content-encoding'), 'gzip');
    assert.match(js.headers.get('cache-control') ?? '', /immutable/);
    // A console route that is not a file gets the application.
    assert.equal((await fetch(`${cluster.url}/queue`)).status, 200);
  });

  test('a wrong password is refused on the login page', async () => {
    const page = await newPage(browser);
    await page.goto(cluster.url);
    await page.fill('input[name=user]', 'alice');
    await page.fill('input[name=password]', 'not-the-password');
    await page.click('button[type=submit]');
    await page.waitForSelector('.login [role=alert]');
    await page.context().close();
  });

  test('a member logs in and sees the cluster map', async () => {
    alice = await newPage(browser);
    await logIn(alice, cluster.url, 'alice', PASSWORD);
    await alice.waitForSelector('[data-testid=cluster-map] [data-testid=host-gpu-sim-1]');
    const text = await alice.textContent('[data-testid=host-gpu-sim-1]');
    assert.match(text, /simulated/i, 'a simulated host says so');
    // The card names its GPUs by model and count, and how many are free.
    assert.equal(await alice.textContent('[data-testid=hostgpus-gpu-sim-1]'), '4× H100 · 4 free');
    await alice.waitForFunction(
      () => document.querySelector('[data-testid=queued-count] dd')?.textContent === '0',
    );
    // Another team's dedicated host is not on her map, nor in the hosts list.
    assert.equal(await alice.locator('[data-testid=host-cv-only]').count(), 0);
    await alice.click('nav >> text=Hosts');
    await alice.waitForSelector('[data-testid=hostrow-gpu-sim-1]');
    assert.doesNotMatch(await alice.textContent('main'), /cv-only/);
    await alice.click('nav >> text=Overview');
    await screenshot(alice, '01-overview');
  });

  test('launches a job from the form and follows its log', async () => {
    await alice.click('nav >> text=My work');
    await alice.waitForSelector('[data-testid=launch-form]');
    await alice.fill(
      '[data-testid=launch-form] [name=command]',
      "sh -c 'echo hello-from-the-console; sleep 300'",
    );
    await alice.fill('[data-testid=launch-form] [name=name]', 'console-job');
    await alice.fill('[data-testid=launch-form] [name=gpus]', '1');
    await screenshot(alice, '02-launch-form');
    await alice.click('[data-testid=launch-submit]');
    await alice.waitForURL(/\/work\/\d+$/);
    jobId = Number(alice.url().match(/\/work\/(\d+)$/)[1]);
    await alice.waitForSelector('[data-testid=job-detail]');
    await alice.waitForFunction(() =>
      /running/.test(document.querySelector('[data-testid=job-state]')?.textContent ?? ''),
    );
    await alice.waitForFunction(() =>
      /hello-from-the-console/.test(
        document.querySelector('[data-testid=job-log]')?.textContent ?? '',
      ),
    );
    await screenshot(alice, '03-job-log');
    const job = await cluster.api('GET', `/jobs/${jobId}`);
    assert.equal(job.user, 'alice');
    assert.equal(job.name, 'console-job');
    assert.equal(job.gpus, 1);
  });

  test("a job's page charts the utilisation of the GPUs it holds", async () => {
    // The simulated agent samples every second: the chart of the run comes within seconds.
    await alice.waitForSelector('[data-testid=job-utilisation]');
    await alice.waitForSelector('[data-testid=job-history-util] canvas', { timeout: 20000 });
    await alice.waitForSelector('[data-testid=job-history-memory] canvas');
    const legend = await alice.textContent('[data-testid=job-history-util]');
    assert.match(legend, /GPU \d/, 'a line per GPU the job holds, named');
    const job = await cluster.api('GET', `/jobs/${jobId}`);
    const history = await cluster.api(
      'GET',
      `/hosts/${job.host}/gpus/${job.gpu_indices[0]}/history?from=${job.started_at}&resolution=raw`,
    );
    assert.ok(history.points.length > 0, 'allotd has samples of the run');
    await alice.locator('[data-testid=job-utilisation]').scrollIntoViewIfNeeded();
    await screenshot(alice, '03a-job-utilisation');
  });

  test('a job no host could run is refused with why, and queues when asked to', async () => {
    await alice.click('nav >> text=My work');
    const form = '[data-testid=launch-form]';
    await alice.waitForSelector(form);
    await alice.fill(`${form} [name=command]`, 'python train.py');
    await alice.fill(`${form} [name=name]`, 'too-big');
    await alice.fill(`${form} [name=gpus]`, '64');
    await alice.click('[data-testid=launch-submit]');
    await alice.waitForFunction(
      (sel) => /the most on one host is/.test(document.querySelector(sel)?.textContent ?? ''),
      form,
    );
    assert.doesNotMatch(alice.url(), /\/work\/\d+$/, 'still on the form: nothing was submitted');
    await screenshot(alice, '03b-refused-too-big');
    await alice.check(`${form} [name=queue_anyway]`);
    await alice.click('[data-testid=launch-submit]');
    await alice.waitForURL(/\/work\/\d+$/);
    const queued = Number(alice.url().match(/\/work\/(\d+)$/)[1]);
    const job = await cluster.api('GET', `/jobs/${queued}`);
    assert.equal(job.state, 'queued');
    assert.equal(job.gpus, 64);
    await cluster.api('POST', `/jobs/${queued}/cancel`, {});
  });

  test('the job shows on the map and in My work', async () => {
    await alice.click('nav >> text=Overview');
    await alice.waitForSelector(`[data-testid=cluster-map] [data-job="${jobId}"]`);
    await screenshot(alice, '04-overview-with-job');
    await alice.click('nav >> text=My work');
    await alice.waitForSelector(`[data-testid=my-jobs] [data-testid=job-${jobId}]`);
  });

  test('the map reads at a glance: team colours, who holds a GPU, GPU models, the queue', async () => {
    // A job of team cv on its own host, so that the admin's map shows two teams.
    const cvJob = await cluster.api(
      'POST',
      '/jobs',
      { team: 'cv', command: ['sleep', '120'], gpus: 1, gpu_model: 'A100' },
      await tokenOf('bob'),
    );
    await giveAdminAPassword();
    const admin = await newPage(browser);
    await logIn(admin, cluster.url, 'admin', PASSWORD);
    const mlCell = `[data-testid=cluster-map] [data-job="${jobId}"]`;
    const cvCell = `[data-testid=cluster-map] [data-job="${cvJob.id}"]`;
    await admin.waitForSelector(mlCell);
    await admin.waitForSelector(cvCell);
    assert.equal(await admin.textContent('[data-testid=hostgpus-cv-only]'), '2× A100 · 1 free');

    // Each team's colour: the legend's swatch, clearly apart from the other team's, and at least
    // 3:1 against its card, in light and in dark.
    const legendColour = (team) =>
      admin.$eval(
        `[data-testid=map-legend] [data-team=${team}] .swatch`,
        (el) => getComputedStyle(el).backgroundColor,
      );
    for (const scheme of ['light', 'dark']) {
      await admin.emulateMedia({ colorScheme: scheme });
      const ml = await cellColours(admin, mlCell);
      const cv = await cellColours(admin, cvCell);
      assert.equal(ml.cell, await legendColour('ml'), `${scheme}: ml's cell has ml's colour`);
      assert.equal(cv.cell, await legendColour('cv'), `${scheme}: cv's cell has cv's colour`);
      const apart = deltaE2000(ml.cell, cv.cell);
      assert.ok(
        apart >= 15,
        `${scheme}: ml ${ml.cell} and cv ${cv.cell} are ${apart.toFixed(1)} apart`,
      );
      for (const [team, c] of Object.entries({ ml, cv })) {
        const r = contrast(c.cell, c.card);
        assert.ok(r >= 3, `${scheme}: ${team} ${c.cell} on its card ${c.card}: ${r.toFixed(2)}:1`);
      }
    }
    await admin.emulateMedia({ colorScheme: 'light' });

    // Hovering a GPU names its holder; a free one says so.
    await admin.hover(mlCell);
    const tip = admin.locator('[data-testid=gpu-tooltip]');
    await tip.waitFor();
    assert.match(await tip.textContent(), new RegExp(`job ${jobId} · alice · team ml`));
    assert.match(await tip.textContent(), /gpu-sim-1 · GPU \d · H100/);
    await screenshot(admin, '04a-map-tooltip');
    await admin.hover('[data-testid=host-cv-only] .gpu.k-free');
    await admin.waitForFunction(() =>
      /cv-only · GPU \d · A100\s*free/.test(
        document.querySelector('[data-testid=gpu-tooltip]')?.textContent ?? '',
      ),
    );
    await admin.mouse.move(0, 0);
    await tip.waitFor({ state: 'detached' });

    // The number queued follows the queue.
    const waiting = await queuedJob('waits-on-the-map');
    await admin.waitForFunction(
      () => document.querySelector('[data-testid=queued-count] dd')?.textContent === '1',
    );
    await screenshot(admin, '04b-map-queued');
    await cluster.api('POST', `/jobs/${waiting.id}/cancel`, {});
    await admin.waitForFunction(
      () => document.querySelector('[data-testid=queued-count] dd')?.textContent === '0',
    );
    await cluster.api('POST', `/jobs/${cvJob.id}/cancel`, {});
    await admin.context().close();
  });

  test('a member of another team sees none of it', async () => {
    const bob = await newPage(browser);
    await logIn(bob, cluster.url, 'bob', PASSWORD);
    await bob.waitForSelector('[data-testid=cluster-map] [data-testid=host-gpu-sim-1]');
    await bob.waitForSelector('[data-testid=cluster-map] [data-testid=host-cv-only]');
    assert.equal(await bob.locator(`[data-job="${jobId}"]`).count(), 0);
    await bob.click('nav >> text=My work');
    await bob.waitForSelector('[data-testid=my-jobs]');
    assert.equal(await bob.locator(`[data-testid=job-${jobId}]`).count(), 0);
    await bob.click('nav >> text=Queue');
    await bob.waitForSelector('[data-testid=queue-table]');
    assert.equal(await bob.locator(`[data-testid=queue-${jobId}]`).count(), 0);
    // Typing the job's address gives nothing of it either.
    await bob.goto(`${cluster.url}/work/${jobId}`);
    await bob.waitForSelector('[role=alert]');
    const body = await bob.textContent('body');
    assert.doesNotMatch(body, /console-job|hello-from-the-console/);
    await screenshot(bob, '05-other-team');
    await bob.context().close();
  });

  test('updates live, without a reload, and reconnects after allotd restarts', async () => {
    await alice.click('nav >> text=Overview');
    await alice.waitForSelector(`[data-testid=cluster-map] [data-job="${jobId}"]`);
    await alice.waitForSelector('.live.on');
    // A job submitted elsewhere (the CLI, another tab) appears on the open map by itself.
    const other = await cluster.api(
      'POST',
      '/jobs',
      { command: ['sleep', '300'], gpus: 1 },
      await aliceToken(),
    );
    await alice.waitForSelector(`[data-testid=cluster-map] [data-job="${other.id}"]`);
    await cluster.api('POST', `/jobs/${other.id}/cancel`, {});
    await alice.waitForSelector(`[data-job="${other.id}"]`, { state: 'detached' });

    await cluster.restartAllotd();
    await alice.waitForSelector('.live.on');
    const third = await cluster.api(
      'POST',
      '/jobs',
      { command: ['sleep', '300'], gpus: 1 },
      await aliceToken(),
    );
    await alice.waitForSelector(`[data-testid=cluster-map] [data-job="${third.id}"]`);
    await screenshot(alice, '05a-live-after-restart');
    await cluster.api('POST', `/jobs/${third.id}/cancel`, {});
  });

  test('holds and releases a queued job, and requeues a running one, from its page', async () => {
    const waiting = await queuedJob('to-hold');
    await alice.goto(`${cluster.url}/work/${waiting.id}`);
    // A queued job may be held, not released or requeued.
    await alice.waitForSelector('[data-testid=job-hold]');
    assert.equal(await alice.locator('[data-testid=job-release]').count(), 0);
    assert.equal(await alice.locator('[data-testid=job-requeue]').count(), 0);
    await alice.click('[data-testid=job-hold]');
    await alice.waitForSelector('[data-testid=job-held]');
    await alice.waitForSelector('[data-testid=job-release]');
    assert.equal(await alice.locator('[data-testid=job-hold]').count(), 0);
    assert.equal((await cluster.api('GET', `/jobs/${waiting.id}`)).held_by, 'alice');
    await screenshot(alice, '05b-job-held');
    await alice.click('[data-testid=job-release]');
    await alice.waitForSelector('[data-testid=job-hold]');
    assert.equal((await cluster.api('GET', `/jobs/${waiting.id}`)).held_by, null);

    // A page that has not caught up (no live updates, no log polls) offers Hold on a job that has
    // ended meanwhile: the server's refusal is shown, and the page catches up.
    const stale = await newPage(browser);
    await logIn(stale, cluster.url, 'alice', PASSWORD);
    await stale.route('**/api/v1/stream', (r) => r.abort());
    await stale.route(/\/api\/v1\/jobs\/\d+\/logs/, (r) => r.abort());
    await stale.goto(`${cluster.url}/work/${waiting.id}`);
    await stale.waitForSelector('[data-testid=job-hold]');
    await cluster.api('POST', `/jobs/${waiting.id}/cancel`, {});
    await stale.click('[data-testid=job-hold]');
    await stale.waitForSelector('[data-testid=job-control-error]');
    assert.match(
      await stale.textContent('[data-testid=job-control-error]'),
      /is cancelled; only a queued job can be held/,
    );
    await stale.waitForSelector('[data-testid=job-hold]', { state: 'detached' });
    await screenshot(stale, '05c-job-control-refused');
    await stale.context().close();

    // A running job may be requeued: it stops and runs again under the same id.
    const before = await cluster.api('GET', `/jobs/${jobId}`);
    await alice.goto(`${cluster.url}/work/${jobId}`);
    await alice.waitForSelector('[data-testid=job-requeue]');
    assert.equal(await alice.locator('[data-testid=job-hold]').count(), 0);
    const asked = new Promise((resolve) =>
      alice.once('dialog', async (d) => {
        resolve(d.message());
        await d.accept();
      }),
    );
    await alice.click('[data-testid=job-requeue]');
    assert.match(await asked, new RegExp(`Requeue job ${jobId}`));
    await waitFor(
      'the job requeued and running again',
      async () => {
        const j = await cluster.api('GET', `/jobs/${jobId}`);
        return j.state === 'running' && j.started_at !== before.started_at;
      },
      30000,
    );
    await alice.waitForFunction(() =>
      /running/.test(document.querySelector('[data-testid=job-state]')?.textContent ?? ''),
    );
    await alice.waitForSelector('[data-testid=job-requeue]');
    await screenshot(alice, '05d-job-requeued');
  });

  test('cancels the job', async () => {
    await alice.goto(`${cluster.url}/work/${jobId}`);
    await alice.waitForSelector('[data-testid=job-cancel]');
    alice.once('dialog', (d) => d.accept());
    await alice.click('[data-testid=job-cancel]');
    await alice.waitForFunction(() =>
      /cancel/.test(document.querySelector('[data-testid=job-state]')?.textContent ?? ''),
    );
    await waitFor(
      'the job cancelled',
      async () => (await cluster.api('GET', `/jobs/${jobId}`)).state === 'cancelled',
    );
    await screenshot(alice, '06-cancelled');
  });

  test('works from the keyboard alone', async () => {
    const page = await newPage(browser);
    await page.goto(cluster.url);
    await page.waitForSelector('input[name=user]');
    assert.equal(await page.evaluate(() => document.activeElement?.name), 'user');
    await page.keyboard.type('alice');
    await page.keyboard.press('Tab');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await page.waitForSelector('[data-testid=whoami]');
    // Tab to the Queue link and follow it.
    for (let i = 0; i < 10; i++) {
      await page.keyboard.press('Tab');
      if ((await page.evaluate(() => document.activeElement?.textContent)) === 'Queue') break;
    }
    await page.keyboard.press('Enter');
    await page.waitForSelector('[data-testid=queue-table]');
    assert.match(page.url(), /\/queue$/);
    await page.context().close();
  });

  test('an admin drains and resumes a host from its page; a member has no such buttons', async () => {
    await giveAdminAPassword();
    const admin = await newPage(browser);
    await logIn(admin, cluster.url, 'admin', PASSWORD);
    await admin.click('nav >> text=Hosts');
    await admin.click('[data-testid=hostrow-gpu-sim-1] >> a');
    await admin.waitForSelector('[data-testid=host-detail]');
    // With a deadline, the drain stops alice's job: the confirmation lists it, and declining
    // changes nothing.
    const job = await runningJob('held');
    await admin.fill('[data-testid=host-actions] input[name=deadline]', '30m');
    const asked = new Promise((resolve) =>
      admin.once('dialog', async (d) => {
        resolve(d.message());
        await d.dismiss();
      }),
    );
    await admin.click('[data-testid=drain-button]');
    assert.match(
      await asked,
      new RegExp(`stops 1 running job[\\s\\S]*j-${job.id} held \\(alice, team ml\\)`),
    );
    assert.equal((await cluster.api('GET', '/hosts/gpu-sim-1')).admin_state, 'available');
    await cluster.api('POST', `/jobs/${job.id}/cancel`, {}, await aliceToken());
    await admin.fill('[data-testid=host-actions] input[name=deadline]', '');
    await admin.fill('[data-testid=host-actions] input[name=reason]', 'console test');
    await admin.click('[data-testid=drain-button]');
    await waitFor('the host drained', async () =>
      ['draining', 'maintenance'].includes(
        (await cluster.api('GET', '/hosts/gpu-sim-1')).admin_state,
      ),
    );
    await admin.waitForFunction(() =>
      /draining|maintenance/.test(
        document.querySelector('[data-testid=host-detail]')?.textContent ?? '',
      ),
    );
    await screenshot(admin, '09-host-drained');
    await admin.click('[data-testid=resume-button]');
    await waitFor(
      'the host resumed',
      async () => (await cluster.api('GET', '/hosts/gpu-sim-1')).admin_state === 'available',
    );
    await admin.context().close();

    const member = await newPage(browser);
    await logIn(member, cluster.url, 'alice', PASSWORD);
    await member.goto(`${cluster.url}/hosts/gpu-sim-1`);
    await member.waitForSelector('[data-testid=host-detail]');
    assert.equal(await member.locator('[data-testid=drain-button]').count(), 0);
    await member.context().close();
  });

  test('approving a lease that would stop work lists the work first; declining changes nothing', async () => {
    await giveAdminAPassword();
    const job = await runningJob('in-the-way');
    // Team cv asks for gpu-sim-1 an hour from now, when alice's job would still be on it.
    const lease = await cluster.api('POST', '/leases', {
      team: 'cv',
      hosts: ['gpu-sim-1'],
      start: '+1h',
      end: '+2h',
      reason: 'console test',
    });
    const admin = await newPage(browser);
    await logIn(admin, cluster.url, 'admin', PASSWORD);
    await admin.click('nav >> text=Hosts');
    await admin.waitForSelector(`[data-testid=lease-approve-${lease.id}]`);
    const asked = new Promise((resolve) =>
      admin.once('dialog', async (d) => {
        resolve(d.message());
        await d.dismiss();
      }),
    );
    await admin.click(`[data-testid=lease-approve-${lease.id}]`);
    assert.match(
      await asked,
      new RegExp(
        `Approving lease ${lease.id} stops 1 running job[\\s\\S]*j-${job.id} in-the-way \\(alice, team ml\\)`,
      ),
    );
    assert.equal((await cluster.api('GET', `/leases/${lease.id}`)).state, 'requested');

    admin.once('dialog', (d) => d.accept());
    await admin.click(`[data-testid=lease-approve-${lease.id}]`);
    await waitFor(
      'the lease approved',
      async () => (await cluster.api('GET', `/leases/${lease.id}`)).state === 'approved',
    );
    // Approval itself stops nothing: the job runs until the lease's start.
    assert.equal(
      (await cluster.api('GET', `/jobs/${job.id}`, undefined, await aliceToken())).state,
      'running',
    );
    await admin.context().close();
    // Leave the host to the tests after this one.
    assert.equal((await cluster.api('POST', `/leases/${lease.id}/end`, {})).state, 'cancelled');
    await cluster.api('POST', `/jobs/${job.id}/cancel`, {}, await aliceToken());
  });

  test("a host's page charts each GPU's utilisation, and says when there are no samples", async () => {
    const page = await newPage(browser);
    await logIn(page, cluster.url, 'alice', PASSWORD);
    await page.goto(`${cluster.url}/hosts/gpu-sim-1`);
    await page.waitForSelector('[data-testid=host-history-util] canvas');
    await page.waitForSelector('[data-testid=host-history-memory] canvas');
    const legend = await page.textContent('[data-testid=host-history-util]');
    for (let i = 0; i < 4; i++) assert.match(legend, new RegExp(`GPU ${i}`));
    await page.locator('[data-testid=host-utilisation]').scrollIntoViewIfNeeded();
    await screenshot(page, '09a-host-utilisation');
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.waitForSelector('[data-testid=host-history-util][data-scheme=dark] canvas');
    await screenshot(page, '09b-host-utilisation-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    // A longer window reads minute rollups.
    await page.selectOption('[data-testid=host-utilisation] select[name=history-window]', '24h');
    await page.waitForSelector(
      '[data-testid=host-history-util] canvas, [data-testid=host-history] .empty',
    );
    // A window with no samples says so in words (the history answered empty).
    await page.route(/\/gpus\/\d+\/history/, (r) =>
      r.fulfill({
        contentType: 'application/json',
        body: JSON.stringify({ host: 'gpu-sim-1', truncated: false, points: [] }),
      }),
    );
    await page.selectOption('[data-testid=host-utilisation] select[name=history-window]', '7d');
    await page.waitForSelector('[data-testid=host-history] >> text=No samples yet');
    assert.equal(await page.locator('[data-testid=host-history-util]').count(), 0);
    await page.context().close();
  });

  test('an admin is told a guarantee exceeds the pool, may overcommit it, and sees it scaled', async () => {
    await giveAdminAPassword();
    const admin = await newPage(browser);
    await logIn(admin, cluster.url, 'admin', PASSWORD);
    await admin.goto(`${cluster.url}/teams/ml`);
    await admin.waitForSelector('[data-testid=team-quota]');
    assert.equal(await admin.textContent('[data-testid=quota-guaranteed]'), '0 GPUs');
    await admin.click('[data-testid=team-quota] >> text=Change quota');
    const form = admin.locator('[data-testid=quota-form]');
    await form.getByLabel('Guaranteed').fill('any=6');
    await form.locator('button[type=submit]').click();
    // The pool is gpu-sim-1's 4 H100 (cv-only is dedicated): refused, with the numbers.
    await admin.waitForSelector('[data-testid=quota-form] [role=alert]');
    assert.match(
      await admin.textContent('[data-testid=quota-form] [role=alert]'),
      /the pool has 4 GPUs \(4 H100\).*at most 4 in all, not 6/,
    );
    await screenshot(admin, '17-quota-refused');
    await admin.check('[data-testid=quota-overcommit]');
    await form.locator('button[type=submit]').click();
    await admin.waitForSelector('[data-testid=quota-form]', { state: 'detached' });
    // The next pass (one runs for ml's next job) scales it down to the pool, and the page says
    // so, with the position's bar.
    const job = await cluster.api(
      'POST',
      '/jobs',
      { team: 'ml', command: ['sleep', '60'], gpus: 1 },
      await aliceToken(),
    );
    await waitFor(
      'the pass scaled the guarantee',
      async () => (await cluster.api('GET', '/teams/ml/quota')).status?.guaranteed === 4,
    );
    await admin.reload();
    await admin.waitForSelector('[data-testid=quota-scaled]');
    assert.match(await admin.textContent('[data-testid=quota-scaled]'), /now 4/);
    await admin.waitForSelector('[data-testid=quota-bar]');
    await screenshot(admin, '18-quota-scaled');
    await cluster.api('POST', `/jobs/${job.id}/cancel`, {}, await aliceToken());
    await cluster.api('PUT', '/teams/ml/quota', { guaranteed: {} });
    await admin.context().close();
  });

  test('the admin page is in tabs, and the audit log reads as sentences with routes on demand', async () => {
    await giveAdminAPassword();
    const admin = await newPage(browser);
    await logIn(admin, cluster.url, 'admin', PASSWORD);
    await admin.click('nav >> text=Admin');
    // allTextContents does not wait: the page (a lazy chunk) must have rendered first.
    await admin.waitForSelector('[data-testid=admin-tabs] [role=tab]');
    const tabs = admin.locator('[data-testid=admin-tabs] [role=tab]');
    assert.deepEqual(await tabs.allTextContents(), [
      'My API tokens',
      'Session profiles',
      'Users',
      'Teams',
      'Pools and join tokens',
      'Audit log',
    ]);
    assert.equal(await admin.getAttribute('[data-testid=tab-tokens]', 'aria-selected'), 'true');
    await admin.waitForSelector('[role=tabpanel] [data-testid=tokens-table]');
    assert.equal(await admin.locator('[data-testid=users-table]').count(), 0, 'one panel at once');
    // A click selects a tab and puts it in the address; the arrow keys move along.
    await admin.click('[data-testid=tab-users]');
    await admin.waitForSelector('[role=tabpanel] [data-testid=users-table]');
    assert.match(admin.url(), /\/admin\?tab=users$/);
    await admin.keyboard.press('ArrowRight');
    await admin.waitForSelector('[role=tabpanel] [data-testid=admin-teams]');
    assert.equal(await admin.getAttribute('[data-testid=tab-teams]', 'aria-selected'), 'true');
    await admin.waitForFunction(() => document.activeElement?.id === 'tab-teams');
    assert.match(admin.url(), /\?tab=teams$/);
    await admin.keyboard.press('End');
    await admin.waitForSelector('[role=tabpanel] [data-testid=audit-table]');
    // The tab survives a reload.
    await admin.reload();
    await admin.waitForSelector('[role=tabpanel] [data-testid=audit-table]');
    assert.equal(await admin.getAttribute('[data-testid=tab-audit]', 'aria-selected'), 'true');

    // What happened so far, in words.
    await admin.waitForSelector('[data-testid=audit-sentence]');
    const sentences = (await admin.locator('[data-testid=audit-sentence]').allTextContents()).join(
      '\n',
    );
    for (const said of [
      /^admin set team ml's quota$/m,
      /^admin drained host gpu-sim-1 \(reason: console test\)$/m,
      /^admin resumed host gpu-sim-1$/m,
      /^admin dedicated host cv-only to team cv$/m,
      new RegExp(`^alice submitted job ${jobId} \\(console-job\\)$`, 'm'),
      new RegExp(`^alice held job \\d+$`, 'm'),
      new RegExp(`^alice requeued job ${jobId}$`, 'm'),
      new RegExp(`^alice cancelled job ${jobId}$`, 'm'),
      /^admin created user alice in team ml as member$/m,
    ]) {
      assert.match(sentences, said);
    }
    // The routes only on demand.
    assert.equal(await admin.locator('[data-testid=audit-route]').count(), 0);
    await screenshot(admin, '19-audit-words');
    await admin.check('[data-testid=audit-show-routes]');
    await admin.waitForSelector('[data-testid=audit-route]');
    const routes = await admin.locator('[data-testid=audit-route]').allTextContents();
    assert.ok(routes.includes('POST /api/v1/hosts/{name}/drain'));
    assert.ok(routes.includes('PUT /api/v1/teams/{team}/quota'));
    await screenshot(admin, '19b-audit-routes');
    await admin.context().close();
  });

  test('the dark theme follows the system, and every page keeps its text readable', async () => {
    await giveAdminAPassword();
    const admin = await newPage(browser);
    await admin.emulateMedia({ colorScheme: 'dark' });
    await logIn(admin, cluster.url, 'admin', PASSWORD);
    const body = await admin.evaluate(() => ({
      fg: getComputedStyle(document.body).color,
      bg: getComputedStyle(document.documentElement).backgroundColor,
    }));
    assert.ok(contrast(body.fg, body.bg) >= 4.5, `body text ${body.fg} on ${body.bg}`);
    assert.ok(contrast(body.bg, '#ffffff') > 10, 'a dark background');
    const pages = [
      ['/', '[data-testid=cluster-map]', '20-dark-overview'],
      [`/work/${jobId}`, '[data-testid=job-log]', '20b-dark-job'],
      ['/hosts/gpu-sim-1', '[data-testid=host-history-util] canvas', '20c-dark-host'],
      ['/admin?tab=audit', '[data-testid=audit-table]', '20d-dark-audit'],
      ['/usage', '[data-testid=usage-chart] canvas', '20e-dark-usage'],
    ];
    for (const [path, ready, shot] of pages) {
      await admin.goto(`${cluster.url}${path}`);
      await admin.waitForSelector(ready);
      await assertReadable(admin, `${path} (dark)`);
      await screenshot(admin, shot);
    }
    // And the light theme, the same way, on the busiest page.
    await admin.emulateMedia({ colorScheme: 'light' });
    await admin.goto(`${cluster.url}/admin?tab=audit`);
    await admin.waitForSelector('[data-testid=audit-table]');
    await assertReadable(admin, '/admin?tab=audit (light)');
    await admin.context().close();
  });

  test('a team-admin defines a session profile; another team does not see it', async () => {
    await cluster.createUser('carol', { ml: 'team-admin' }, PASSWORD);
    const carol = await newPage(browser);
    await logIn(carol, cluster.url, 'carol', PASSWORD);
    await carol.click('nav >> text=Admin');
    await carol.click('[data-testid=tab-profiles]');
    // The profile allotd ships is for everyone.
    await carol.waitForSelector('[data-testid=profiles-table] [data-testid=profile-jupyter]');
    const form = '[data-testid=profile-create-form]';
    await carol.fill(`${form} [name=name]`, 'ml-torch');
    // A command with an unbalanced quote is refused on its field, and the page stays usable.
    await carol.fill(`${form} [name=command]`, "jupyter-server --notebook-dir='/data");
    await carol.click(`${form} button[type=submit]`);
    await carol.waitForSelector(`${form} [role=alert]`);
    assert.match(await carol.textContent(`${form} [role=alert]`), /unterminated single quote/);
    await carol.fill(`${form} [name=command]`, '/opt/venvs/torch/bin/jupyter-server');
    await carol.fill(`${form} [name=gpus]`, '1');
    await carol.fill(`${form} [name=idle_after]`, 'soon');
    await carol.click(`${form} button[type=submit]`);
    // Bad input: the server's error, naming the field, and nothing made.
    await carol.waitForSelector(`${form} [role=alert]`);
    assert.match(await carol.textContent(`${form} [role=alert]`), /idle\.after/);
    await carol.fill(`${form} [name=idle_after]`, '45m');
    await carol.click(`${form} button[type=submit]`);
    await carol.waitForSelector('[data-testid=profile-ml-torch]');
    const made = await cluster.api('GET', '/profiles/ml-torch');
    assert.equal(made.team, 'ml');
    assert.equal(made.defaults.gpus, 1);
    assert.equal(made.idle.after, '45m');
    await screenshot(carol, '10-profiles');
    await carol.context().close();

    const bob = await newPage(browser);
    await logIn(bob, cluster.url, 'bob', PASSWORD);
    await bob.click('nav >> text=Admin');
    await bob.click('[data-testid=tab-profiles]');
    await bob.waitForSelector('[data-testid=profiles-table] [data-testid=profile-jupyter]');
    assert.equal(await bob.locator('[data-testid=profile-ml-torch]').count(), 0);
    // A member may not define profiles: no form.
    assert.equal(await bob.locator('[data-testid=profile-create-form]').count(), 0);
    await bob.context().close();
  });

  test('a member starts a Jupyter session from My work, opens and stops it', async () => {
    await alice.click('nav >> text=My work');
    const panel = '[data-testid=sessions-panel]';
    await alice.waitForSelector(`${panel} [data-testid=new-session-form]`);
    // The profile allotd ships is the default, and only its storage types are offered.
    await alice.waitForFunction(() =>
      [...(document.querySelector('[data-testid=new-session-profile]')?.options ?? [])].some(
        (o) => o.value === 'jupyter',
      ),
    );
    assert.equal(await alice.inputValue('[data-testid=new-session-profile]'), 'jupyter');
    const kinds = await alice.$$eval('[data-testid=new-session-storage] option', (os) =>
      os.map((o) => o.value),
    );
    assert.deepEqual(kinds.sort(), ['local', 'scratch']);

    // Bad input: the server's error, naming the field, and nothing started.
    await alice.fill('[data-testid=new-session-name]', 'my notebook');
    await alice.click('[data-testid=new-session-submit]');
    await alice.waitForSelector('[data-testid=new-session-error]');
    assert.match(await alice.textContent('[data-testid=new-session-error]'), /name/);
    assert.equal(
      await alice.getAttribute('[data-testid=new-session-name]', 'aria-invalid'),
      'true',
    );
    await screenshot(alice, '11-session-bad-name');
    const none = await cluster.api('GET', '/sessions?ended=true', undefined, await aliceToken());
    assert.equal(none.length, 0);

    await alice.fill('[data-testid=new-session-name]', 'nb-console');
    await alice.click('[data-testid=new-session-submit]');
    await alice.waitForSelector('[data-testid=session-row-nb-console]');
    assert.equal(await alice.locator('[data-testid=new-session-error]').count(), 0);
    const [made] = await cluster.api('GET', '/sessions', undefined, await aliceToken());
    assert.equal(made.name, 'nb-console');
    assert.equal(made.profile, 'jupyter');
    assert.equal(made.user, 'alice');
    assert.equal(made.storage, 'scratch');

    // Running once Jupyter answers on the host; only then is there a link to it.
    await alice.waitForFunction(
      () =>
        document.querySelector('[data-testid=session-state-nb-console]')?.textContent === 'running',
      null,
      { timeout: 30000 },
    );
    const open = alice.locator('[data-testid=session-open-nb-console]');
    await open.waitFor();
    assert.equal(await open.getAttribute('href'), `/sessions/${made.id}/`);
    assert.equal(await open.getAttribute('target'), '_blank');
    // Following it lands on the session's own origin (docs/sessions.md, "Origins"), where
    // Jupyter answers with the cookie the handoff set, and the API does not.
    const [jupyter] = await Promise.all([alice.context().waitForEvent('page'), open.click()]);
    await jupyter.waitForLoadState('load');
    const landed = new URL(jupyter.url());
    assert.equal(landed.hostname, `s${made.id}.localhost`);
    assert.match(landed.pathname, new RegExp(`^/sessions/${made.id}/`));
    const status = await jupyter.evaluate(async (id) => {
      const r = await fetch(`/sessions/${id}/api/status`);
      const api = await fetch('/api/v1/whoami');
      return [r.status, api.status];
    }, made.id);
    assert.deepEqual(status, [200, 404]);
    await jupyter.close();
    // Its storage, and how to reach it over SSH where the host offers it.
    await alice.waitForFunction(
      () =>
        /used/.test(
          document.querySelector('[data-testid=session-storage-nb-console]')?.textContent ?? '',
        ),
      null,
      { timeout: 30000 },
    );
    const storageCell = await alice.textContent('[data-testid=session-storage-nb-console]');
    assert.match(storageCell, /^scratch/);
    assert.match(storageCell, /allot ssh nb-console/);
    await screenshot(alice, '12-session-running');

    alice.once('dialog', (d) => d.accept());
    await alice.click('[data-testid=session-stop-nb-console]');
    await waitFor(
      'the session stopped',
      async () =>
        (await cluster.api('GET', `/sessions/${made.id}`, undefined, await aliceToken())).state ===
        'stopped',
    );
    // Gone from the live list; there with its end among the ended ones.
    await alice.waitForSelector('[data-testid=session-row-nb-console]', { state: 'detached' });
    await alice.check('[data-testid=sessions-show-ended]');
    await alice.waitForFunction(
      () =>
        document.querySelector('[data-testid=session-state-nb-console]')?.textContent === 'stopped',
    );
    assert.equal(await alice.locator('[data-testid=session-stop-nb-console]').count(), 0);
    await screenshot(alice, '13-session-stopped');
  });

  test('a session link opened without a login leads to the login page, then to a notebook that runs a cell', async () => {
    const made = await cluster.api('POST', '/sessions', { name: 'nb-tree' }, await aliceToken());
    await waitFor(
      'the session running',
      async () =>
        (await cluster.api('GET', `/sessions/${made.id}`, undefined, await aliceToken())).state ===
        'running',
    );
    // A new browser (no console login) follows the session's link: the login page says why.
    const page = await newPage(browser);
    await page.goto(`${cluster.url}/sessions/${made.id}/`);
    await page.waitForSelector('[data-testid=login-for-session]');
    assert.match(new URL(page.url()).search, new RegExp(`next=%2Fsessions%2F${made.id}%2F`));
    await screenshot(page, '14-session-link-login');
    await page.fill('input[name=user]', 'alice');
    await page.fill('input[name=password]', PASSWORD);
    await page.click('button[type=submit]');
    // Logged in, it goes on to the session's own origin and the classic notebook's file tree.
    await page.waitForURL(
      (url) =>
        url.hostname === `s${made.id}.localhost` && url.pathname === `/sessions/${made.id}/tree`,
      { timeout: 30000 },
    );
    await page.waitForSelector('#notebook_list');
    await screenshot(page, '15-notebook-tree');

    // New > Python 3 opens a notebook in a new tab; a cell runs there and shows its output.
    await page.click('#new-dropdown-button');
    const [notebook] = await Promise.all([
      page.context().waitForEvent('page'),
      page.click('#new-menu li[id^=kernel-] a'),
    ]);
    notebook.setDefaultTimeout(30000);
    await notebook.waitForURL((url) => url.pathname.startsWith(`/sessions/${made.id}/notebooks/`));
    await notebook.waitForSelector('#kernel_indicator_icon.kernel_idle_icon');
    await notebook.click('.cell .CodeMirror');
    await notebook.keyboard.type('print(6 * 7)');
    await notebook.keyboard.press('Shift+Enter');
    await notebook.waitForFunction(() =>
      [...document.querySelectorAll('.output_subarea pre')].some(
        (p) => p.textContent.trim() === '42',
      ),
    );
    await screenshot(notebook, '16-notebook-cell');
    await page.context().close();
    await cluster.api('POST', `/sessions/${made.id}/stop`, {}, await aliceToken());
  });

  test('the usage chart renders', async () => {
    await alice.click('nav >> text=Usage');
    await alice.waitForSelector('[data-testid=usage-chart] canvas');
    await alice.waitForSelector('[data-testid=usage-table]');
    await screenshot(alice, '07-usage');
  });

  test('a member of two teams picks one on Usage, and the console remembers it', async () => {
    await cluster.createUser('dana', { ml: 'member', cv: 'member' }, PASSWORD);
    const dana = await newPage(browser);
    await logIn(dana, cluster.url, 'dana', PASSWORD);
    await dana.click('nav >> text=Usage');
    await dana.waitForSelector('[data-testid=usage-chart] canvas');
    // cv's usage (bob's job on the map), or none: either way a page, not an error.
    await dana.waitForFunction(
      () =>
        document.querySelector('[data-testid=usage-table]') ||
        /No GPU time in this window/.test(document.querySelector('main')?.textContent ?? ''),
    );
    // No "you belong to several teams" error: the page asks for one team.
    assert.equal(await dana.locator('main [role=alert]').count(), 0);
    assert.equal(await dana.inputValue('[data-testid=usage-team]'), 'cv');
    // ml's usage (alice's jobs) shows once ml is picked.
    await dana.selectOption('[data-testid=usage-team]', 'ml');
    await dana.waitForSelector('[data-testid=usage-table]');
    assert.equal(await dana.locator('main [role=alert]').count(), 0);
    await screenshot(dana, '07b-usage-team-picker');
    // The launch form starts on the team picked last, after a reload too.
    await dana.reload();
    await dana.click('nav >> text=My work');
    await dana.waitForSelector('[data-testid=launch-form]');
    assert.equal(await dana.inputValue('[data-testid=launch-form] [name=team]'), 'ml');
    await dana.click('nav >> text=Usage');
    assert.equal(await dana.inputValue('[data-testid=usage-team]'), 'ml');
    await dana.context().close();
  });

  test('the queue says when waiting work is expected to start, once the work ahead declares its end', async () => {
    // A host of its own model, so that nothing else the tests run lands on it (and late in the
    // run: the pool's size is part of what earlier tests check).
    await cluster.addAgent('dated', 'sim:1xL4');
    const token = await aliceToken();
    const onL4 = async (extra) =>
      cluster.api('POST', '/jobs', { team: 'ml', gpus: 1, gpu_models: ['L4'], ...extra }, token);
    const running = async (extra) => {
      const job = await onL4({ command: ['sleep', '600'], ...extra });
      await waitFor(
        `job ${job.id} running`,
        async () => (await cluster.api('GET', `/jobs/${job.id}`)).state === 'running',
      );
      return job;
    };
    const cell = (job) => `[data-testid=expected-start-${job.id}]`;

    const ahead = await running({ max_runtime: '1h' });
    const behind = await onL4({ command: ['true'], name: 'waits-its-turn' });
    await waitFor(
      'an expected start for the job behind',
      async () => (await cluster.api('GET', `/jobs/${behind.id}`)).expected_start != null,
    );
    const started = Date.parse((await cluster.api('GET', `/jobs/${ahead.id}`)).started_at);
    const expected = Date.parse((await cluster.api('GET', `/jobs/${behind.id}`)).expected_start);
    // When the job ahead must be gone: its max runtime, then the grace a stop is given (the
    // times are given to the second).
    const late = expected - (started + 3600 * 1000);
    assert.ok(late > -2000 && late < 60 * 1000, `${expected} vs ${started}`);
    await alice.goto(`${cluster.url}/queue`);
    await alice.waitForSelector(cell(behind));
    assert.match(await alice.textContent(cell(behind)), /^in (59m|1h 0m)$/);
    await screenshot(alice, '06b-queue-expected-start');
    for (const job of [behind, ahead]) await cluster.api('POST', `/jobs/${job.id}/cancel`, {});

    // Work behind a job that declared no end has no time to give.
    const open = await running({});
    const unknown = await onL4({ command: ['true'] });
    await alice.waitForSelector(cell(unknown));
    assert.equal(await alice.textContent(cell(unknown)), 'unknown');
    for (const job of [unknown, open]) await cluster.api('POST', `/jobs/${job.id}/cancel`, {});
  });

  test('an ended session returns to the login page', async () => {
    await alice.context().clearCookies();
    await alice.click('nav >> text=Queue');
    await alice.waitForSelector('input[name=password]');
    assert.match(await alice.textContent('body'), /session has ended/i);
    await screenshot(alice, '08-session-ended');
    await alice.context().close();
  });
});
