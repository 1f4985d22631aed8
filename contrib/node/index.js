'use strict';
/**
 * nsqbox for Node tests: start `nsqbox up --ephemeral-ports --ready-json` once per test
 * file, give its addresses, and wrap the admin service's handle routes (wait for counts,
 * capture, consume, faults, the clock). See docs/testing-other-languages.md.
 *
 * Works with node's test runner (`node --test`) and Jest: start a box in `before`
 * (`beforeAll`), stop it in `after` (`afterAll`). Node 18 or newer (global fetch).
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

/** An admin route answered something other than 2xx. `status` and `code` say what. */
class NSQBoxError extends Error {
  constructor(method, route, status, body) {
    let code = body;
    try {
      code = JSON.parse(body).message;
    } catch (_) {
      // not JSON: keep the text
    }
    super(`nsqbox: ${method} ${route}: ${status} ${code}`);
    this.name = 'NSQBoxError';
    this.status = status;
    this.code = code;
  }
}

function query(params) {
  const pairs = Object.entries(params || {}).filter(([, v]) => v !== undefined && v !== null);
  return pairs.length ? `?${new URLSearchParams(pairs.map(([k, v]) => [k, String(v)]))}` : '';
}

/** A capture of one topic: `read()` what arrived so far, `close()` to end it. */
class Capture {
  constructor(box, id, topic) {
    this.box = box;
    this.id = id;
    this.topic = topic;
    this.messages = [];
    this.lost = false;
  }

  async _take(method) {
    const doc = await this.box.request(method, `/api/captures/${this.id}`, {
      from: this.messages.length,
    });
    for (const m of doc.messages) {
      this.messages.push({ ...m, body: Buffer.from(m.body, 'base64') });
    }
    this.lost = doc.lost;
    return this.messages;
  }

  /** Every message captured so far: `{id, body (Buffer), timestamp, defer_ms, node}`. */
  read() {
    return this._take('GET');
  }

  /** End the capture; every message it captured. */
  close() {
    return this._take('DELETE');
  }

  /** The bodies captured so far, as strings. */
  async bodies() {
    return (await this.read()).map((m) => m.body.toString());
  }
}

/** A lasting fault in force: `lift()` ends it. */
class Fault {
  constructor(box, doc) {
    this.box = box;
    this.info = doc;
  }

  async lift() {
    const doc = await this.box.request('DELETE', `/api/faults/${this.info.id}`, {
      node: this.info.node,
    });
    return doc.lifted;
  }
}

/** One running box: addresses, and the handle's operations over its admin service. */
class Box {
  constructor(child, ready, dataPath) {
    this._child = child;
    this._dataPath = dataPath;
    this.nsqdTCPAddress = ready.nsqd_tcp_address;
    this.nsqdHTTPAddress = ready.nsqd_http_address;
    this.lookupdTCPAddress = ready.lookupd_tcp_address;
    this.lookupdHTTPAddress = ready.lookupd_http_address;
    this.adminHTTPAddress = ready.admin_http_address;
    const [host, port] = splitAddress(ready.nsqd_tcp_address);
    /** nsqd's TCP host and port, as nsqjs's Writer takes them. */
    this.nsqdHost = host;
    this.nsqdPort = port;
  }

  /** One admin route; its JSON answer, or an NSQBoxError. */
  async request(method, route, params) {
    const url = `http://${this.adminHTTPAddress}${route}${query(params)}`;
    const response = await fetch(url, { method });
    const text = await response.text();
    if (!response.ok) {
      throw new NSQBoxError(method, route, response.status, text);
    }
    return JSON.parse(text);
  }

  /**
   * Wait until the topic (or its channel) exists with every count given (`depth`,
   * `in_flight`, `deferred`, `message_count`, `requeue_count`, `timeout_count`,
   * `clients`); its counts. `timeout` (seconds or a Go duration, at most 60 s) bounds it:
   * an NSQBoxError with status 408 says what it last saw.
   */
  waitFor(topic, channel, counts = {}) {
    const route = channel ? `/api/wait/${topic}/${channel}` : `/api/wait/${topic}`;
    return this.request('GET', route, counts);
  }

  /** Start recording every message published to `topic`; a Capture. */
  async capture(topic) {
    const doc = await this.request('POST', '/api/captures', { topic });
    return new Capture(this, doc.id, topic);
  }

  /** Take exactly `n` messages of the channel (finished); their bodies as Buffers. */
  async consume(topic, channel, n = 1, { timeout, node } = {}) {
    const doc = await this.request('POST', `/api/consume/${topic}/${channel}`, {
      n,
      timeout,
      node,
    });
    return doc.messages.map((m) => Buffer.from(m.body, 'base64'));
  }

  /** Start a lasting fault (`fail_publishes`, `disk_full`, `latency`, `stall`, ...). */
  async fault(kind, params = {}) {
    return new Fault(this, await this.request('POST', `/api/faults/${kind}`, params));
  }

  /** PUB, MPUB and DPUB to `topic` fail (`count` commands, or until lifted). */
  failPublishes({ topic, count, duration, error } = {}) {
    return this.fault('fail_publishes', { topic, count, duration, error });
  }

  /** End every fault; how many there were. */
  async liftAll() {
    return (await this.request('DELETE', '/api/faults')).lifted;
  }

  /** Restart, crash or start nsqd `node` (the box keeps its ports and data). */
  restart(node = 0) {
    return this.request('POST', '/api/faults/restart', { node });
  }

  crash(node = 0) {
    return this.request('POST', '/api/faults/crash', { node });
  }

  start(node = 0) {
    return this.request('POST', '/api/faults/start', { node });
  }

  /** Broker time, epoch seconds. */
  async now() {
    return (await this.request('GET', '/api/clock')).clocks[0].now;
  }

  /** Move a manual clock `by` (seconds or a Go duration, `"1h"`); what fired. */
  async advance(by) {
    return (await this.request('POST', '/api/clock/advance', { by })).fired;
  }

  /** Stop the box (SIGTERM: a clean shutdown) and remove its data. */
  async stop() {
    const child = this._child;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    fs.rmSync(this._dataPath, { recursive: true, force: true });
  }
}

function splitAddress(address) {
  const at = address.lastIndexOf(':');
  let host = address.slice(0, at);
  if (host.startsWith('[')) host = host.slice(1, -1);
  return [host, Number(address.slice(at + 1))];
}

/**
 * Start a box: `nsqbox up --ephemeral-ports --ready-json` in a new data directory.
 * `command` is the nsqbox program (default: `$NSQBOX`, else `nsqbox` on PATH); `args`
 * are more flags (`['--clock', 'manual']`); `timeout` in ms bounds the start.
 */
function startBox({ command, args = [], timeout = 30000 } = {}) {
  const program = command || process.env.NSQBOX || 'nsqbox';
  const dataPath = fs.mkdtempSync(path.join(os.tmpdir(), 'nsqbox-node-'));
  const argv = ['up', '--ephemeral-ports', '--ready-json', '--data-path', dataPath, ...args];
  const child = spawn(program, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const fail = (why) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      fs.rmSync(dataPath, { recursive: true, force: true });
      reject(new Error(`nsqbox: ${program} up ${why}${err ? `: ${err.trim()}` : ''}`));
    };
    const timer = setTimeout(() => fail(`did not start in ${timeout} ms`), timeout);
    child.on('error', (e) => fail(`could not run (${e.message}); set NSQBOX`));
    child.on('exit', (code) => fail(`exited (${code})`));
    child.stderr.on('data', (chunk) => {
      err = (err + chunk).slice(-4000);
    });
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line === undefined || !out.includes('\n')) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      child.stdout.removeAllListeners('data');
      child.stdout.resume(); // keep draining: a full pipe would stall the box
      child.stderr.resume();
      resolve(new Box(child, JSON.parse(line), dataPath));
    });
  });
}

module.exports = { Box, Capture, Fault, NSQBoxError, startBox };
