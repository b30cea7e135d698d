// A real Allot cluster for the console's end-to-end tests: allotd on loopback (embedded SQLite in
// a temporary directory) serving the built console, and one allot-agent with simulated GPUs.
// Everything is stopped and removed by stop().
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, existsSync, openSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const repo = resolve(import.meta.dirname, '..', '..');
const bin = process.env.ALLOT_BIN ?? join(repo, 'build', 'bin');
const webDir = join(repo, 'web', 'dist');

async function freePort() {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
    srv.on('error', fail);
  });
}

async function waitFor(what, check, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

export class Cluster {
  constructor() {
    this.dir = mkdtempSync(join(tmpdir(), 'allot-console-'));
    this.procs = [];
  }

  async start({ gpus = 'sim:4xH100' } = {}) {
    if (!existsSync(join(webDir, 'index.html'))) {
      throw new Error(`${webDir}/index.html is missing: build the console first (make build)`);
    }
    this.port = await freePort();
    this.url = `http://127.0.0.1:${this.port}`;
    await this.#startAllotd();
    this.adminToken = readFileSync(join(this.dir, 'data', 'admin.token'), 'utf8').trim();
    await this.addAgent('gpu-sim-1', gpus);
    return this;
  }

  // Starts an allot-agent with simulated GPUs and waits until its host is online.
  async addAgent(name, gpus) {
    const token = await this.api('POST', '/hosts/join-tokens', { ttl: '10m' });
    this.#spawn('allot-agent', [
      '--server',
      this.url,
      '--join-token',
      token.token,
      '--name',
      name,
      '--gpus',
      gpus,
      '--work-dir',
      join(this.dir, `agent-${name}`),
      '--run-as-owner',
      'off',
      '--telemetry-interval',
      '1s',
    ]);
    await waitFor(`${name} online`, async () => {
      const hosts = await this.api('GET', '/hosts');
      return hosts.some((h) => h.name === name && h.state === 'online');
    });
  }

  async #startAllotd() {
    this.allotd = this.#spawn('allotd', [
      '--listen',
      `127.0.0.1:${this.port}`,
      '--data-dir',
      join(this.dir, 'data'),
      '--web-dir',
      webDir,
      '--heartbeat',
      '1s',
      '--stream-keepalive',
      '1s',
    ]);
    await waitFor('allotd', async () => (await fetch(`${this.url}/healthz`)).ok);
  }

  // Stops allotd and starts it again on the same port and data: what the console sees when the
  // control plane restarts (an upgrade, a crash).
  async restartAllotd() {
    const old = this.allotd;
    old.kill('SIGTERM');
    await new Promise((ok) => (old.exitCode !== null ? ok() : old.once('exit', ok)));
    this.procs = this.procs.filter((p) => p !== old);
    await this.#startAllotd();
  }

  #spawn(name, args) {
    const log = openSync(join(this.dir, `${name}.log`), 'a');
    const p = spawn(join(bin, name), args, { stdio: ['ignore', log, log] });
    p.name = name;
    this.procs.push(p);
    return p;
  }

  // An API call as the platform admin (or `token`); throws on an error status.
  async api(method, path, body, token = this.adminToken) {
    const res = await fetch(`${this.url}/api/v1${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  async createTeam(name) {
    return this.api('POST', '/teams', { name });
  }

  async createUser(name, teams, password) {
    return this.api('POST', '/users', { name, teams, password });
  }

  log(name) {
    try {
      return readFileSync(join(this.dir, `${name}.log`), 'utf8');
    } catch {
      return '';
    }
  }

  async stop({ keep = false } = {}) {
    for (const p of [...this.procs].reverse()) {
      if (p.exitCode === null && p.signalCode === null) {
        p.kill('SIGTERM');
        await Promise.race([new Promise((ok) => p.once('exit', ok)), sleep(5000)]);
        if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
      }
    }
    if (!keep) rmSync(this.dir, { recursive: true, force: true });
  }
}

export { waitFor };
