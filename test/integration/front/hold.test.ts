// The front a model at zero is to keep (activities/builders/front.ts; docs/design/scaling.md, section 6), checked
// against a real HAProxy (Debian's, installed by deploy/local/install.sh) and the engine stand-in on loopback: a
// request that comes while no replica answers is held and answered once one does — a streamed completion and a
// 50 KB prompt too — and what is over the bound or outlasts the hold is answered 503 with Retry-After, never reset.
// Nothing here runs in Kubernetes yet: the front's objects are built (front-objects.ts), not deployed by Ferry.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { streamOnce } from '../../../bench/lib.js';
import { createEngineSim, type EngineSim } from '../../../deploy/engine-sim/server.js';
import { FRONT_DEFAULTS, frontConfig, type FrontOptions } from '../../../activities/builders/front.js';
import { frontConfigFor } from '../../../activities/builders/front-objects.js';
import { frontLoad } from '../../../activities/scaling/load.js';
import type { ServedModel } from '../../../workflows/contract/index.js';
import { waitFor } from '../../support/kube.js';
import { fixtureModel } from '../../unit/fixtures.js';
import { freePort } from '../../support/e2e.js';

/** Debian's HAProxy, as deploy/local/install.sh installs it. */
const HAPROXY = '/usr/sbin/haproxy';
const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

/** The exporter's port of the front started last. */
let metricsPort = 0;
const frontReading = async () => frontLoad(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text());

/**
 * A running HAProxy with the front's configuration for `options`, in front of `127.0.0.1:<enginePort>`; with `model`,
 * the configuration as deployed for that model (front-objects.ts), with only its addresses moved onto loopback.
 */
async function startFront(
  enginePort: number,
  options: Partial<FrontOptions> = {},
  model?: ServedModel,
): Promise<string> {
  const port = await freePort();
  metricsPort = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'ferry-front-'));
  const file = join(dir, 'haproxy.cfg');
  const loopback = {
    bind: `127.0.0.1:${port}`,
    engine: `127.0.0.1:${enginePort}`,
    metricsBind: `127.0.0.1:${metricsPort}`,
  };
  const config = model
    ? frontConfigFor(model, { ...loopback, ...options })
    : frontConfig({ ...FRONT_DEFAULTS, ...loopback, ...options });
  writeFileSync(file, config);
  let log = '';
  const proc: ChildProcess = spawn(HAPROXY, ['-db', '-f', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout!.on('data', (d) => (log += d));
  proc.stderr!.on('data', (d) => (log += d));
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  stops.push(async () => {
    proc.kill('SIGTERM');
    await exited;
  });
  for (let tries = 0; ; tries++) {
    const up = await new Promise<boolean>((resolve) => {
      const socket = createConnection(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      }).on('error', () => resolve(false));
    });
    if (up) return `http://127.0.0.1:${port}`;
    if (proc.exitCode !== null || tries > 100) throw new Error(`haproxy did not start: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function startEngine(port: number): Promise<EngineSim> {
  const sim = createEngineSim({ port, servedModelNames: ['m'], loadDelaySeconds: 0 });
  await sim.start();
  stops.push(() => sim.stop());
  return sim;
}

interface Answer {
  status: number;
  retryAfter: string | null;
  body: string;
  ms: number;
}

async function ask(url: string, path: string, body?: unknown): Promise<Answer> {
  const started = performance.now();
  const res = await fetch(`${url}${path}`, {
    method: body ? 'POST' : 'GET',
    headers: body ? { 'content-type': 'application/json' } : {},
    ...(body ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await res.text();
  return {
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    body: text,
    ms: performance.now() - started,
  };
}

describe('the front (HAProxy) of a model at zero', () => {
  it('holds requests while no replica answers, and answers each once one does', async () => {
    const enginePort = await freePort();
    const url = await startFront(enginePort, { holdSeconds: 30 });
    const asked = performance.now();
    const answers = Promise.all([
      ask(url, '/v1/models'),
      ask(url, '/v1/completions', { model: 'm', prompt: 'abcdefghij'.repeat(5000), max_tokens: 3 }),
      ...Array.from({ length: 4 }, () => ask(url, '/v1/completions', { model: 'm', prompt: 'a b', max_tokens: 4 })),
    ]);
    const streamed = streamOnce(url, 8);
    // The first replica answers 3 s later.
    await new Promise((r) => setTimeout(r, 3_000));
    const upAt = performance.now() - asked;
    await startEngine(enginePort);
    const all = await answers;
    expect(all.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(JSON.parse(all[0].body)).toMatchObject({ data: [{ id: 'm' }] });
    // Each waited for the replica, and was answered within about a second (one connection attempt a second) of it.
    for (const answer of all) {
      expect(answer.ms).toBeGreaterThanOrEqual(upAt - 100);
      expect(answer.ms).toBeLessThan(upAt + 5_000);
    }
    const stream = await streamed;
    expect(stream).toMatchObject({ status: 200, done: true });
  });

  it('turns away what is over its bound at once: 503, Retry-After, an OpenAI-style error', async () => {
    const enginePort = await freePort();
    const url = await startFront(enginePort, { holdSeconds: 30, maxConnections: 2, maxQueued: 1 });
    const held = [0, 1, 2].map(async (i) => {
      await new Promise((r) => setTimeout(r, i * 200));
      return await ask(url, '/v1/models');
    });
    await new Promise((r) => setTimeout(r, 1_000));
    // What the autoscaler is to read: three requests in the front (the count of those taken includes the check that
    // the front listens, a connection without a request).
    const holding = await frontReading();
    expect(holding).toMatchObject({ inFlight: 3 });
    // Two held on their connection, one waiting in the queue: the fourth and fifth are turned away.
    const over = await Promise.all([ask(url, '/v1/models'), ask(url, '/v1/models')]);
    for (const answer of over) {
      expect(answer).toMatchObject({ status: 503, retryAfter: '30' });
      expect(answer.ms).toBeLessThan(2_000);
      expect(JSON.parse(answer.body)).toEqual({
        error: {
          message: 'too many requests are waiting for this model; try again later',
          type: 'service_unavailable',
          code: 503,
        },
      });
    }
    await startEngine(enginePort);
    expect((await Promise.all(held)).map((a) => a.status)).toEqual([200, 200, 200]);
    // Answered: none in the front; two more taken, the two turned away.
    expect(await frontReading()).toEqual({ inFlight: 0, requests: holding!.requests + 2 });
  });

  it('answers 503 with Retry-After when no replica answers within the hold, not a reset connection', async () => {
    const url = await startFront(await freePort(), { holdSeconds: 3, retryAfterSeconds: 60 });
    const answer = await ask(url, '/v1/completions', { model: 'm', prompt: 'a', max_tokens: 1 });
    expect(answer).toMatchObject({ status: 503, retryAfter: '60' });
    expect(JSON.parse(answer.body)).toMatchObject({ error: { type: 'service_unavailable', code: 503 } });
    // Three attempts a second apart, then the answer.
    expect(answer.ms).toBeGreaterThanOrEqual(2_500);
    expect(answer.ms).toBeLessThan(10_000);
  });

  it("as deployed for a model: ready on its own path while no replica answers, and holding the model's requests", async () => {
    const enginePort = await freePort();
    const url = await startFront(enginePort, { holdSeconds: 30 }, fixtureModel('minimal-hf'));
    // The kubelet's probe: answered by HAProxy itself, at once, with no engine.
    const ready = await ask(`http://127.0.0.1:${metricsPort}`, '/ready');
    expect(ready.status).toBe(200);
    expect(ready.ms).toBeLessThan(2_000);
    const held = ask(url, '/v1/completions', { model: 'm', prompt: 'a b', max_tokens: 2 });
    await waitFor('the request held in the front', 10_000, async () => (await frontReading())?.inFlight === 1);
    await startEngine(enginePort);
    expect((await held).status).toBe(200);
  });

  it('refuses options that would make a broken configuration', () => {
    const base = { ...FRONT_DEFAULTS, bind: ':8000', engine: 'm-engine.models.svc:8000' };
    expect(frontConfig(base)).toContain('server engine m-engine.models.svc:8000 maxconn 1024');
    expect(() => frontConfig({ ...base, holdSeconds: 0 })).toThrow(/holdSeconds must be a whole number above 0/);
    expect(() => frontConfig({ ...base, engine: 'x; rm -rf' })).toThrow(/<host>:<port>/);
    expect(() => frontConfig({ ...base, engine: ':8000' })).toThrow(/<host>:<port>/);
    expect(() => frontConfig({ ...base, metricsBind: 'any' })).toThrow(/<host>:<port>/);
    expect(() => frontConfig({ ...base, readyPath: '/ready' })).toThrow(/needs metricsBind/);
    expect(() => frontConfig({ ...base, metricsBind: ':9101', readyPath: '/r; x' })).toThrow(/plain path/);
    expect(frontLoad('haproxy_backend_current_sessions{proxy="engine"} 2\n')).toBeUndefined();
  });
});
