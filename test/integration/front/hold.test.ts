// The front a model at zero is to keep (activities/builders/front.ts; docs/design/scaling.md, section 6), checked
// against a real HAProxy (Debian's, installed by deploy/local/install.sh) and the engine stand-in on loopback: a
// request that comes while no replica answers is held and answered once one does — a streamed completion and a
// 50 KB prompt too — and what is over the bound or outlasts the hold is answered 503 with Retry-After, never reset.
import { afterEach, describe, expect, it } from 'vitest';
import { streamOnce } from '../../../bench/lib.js';
import { FRONT_DEFAULTS, frontConfig, type FrontOptions } from '../../../activities/builders/front.js';
import { frontLoad } from '../../../activities/scaling/load.js';
import type { ServedModel } from '../../../workflows/contract/index.js';
import { waitFor } from '../../support/kube.js';
import { fixtureModel } from '../../unit/fixtures.js';
import { freePort } from '../../support/e2e.js';
import { ask, startEngine, startFront as startHarnessFront, stopAll } from './front-harness.js';

afterEach(stopAll);

/** The exporter's port of the front started last. */
let metricsPort = 0;
const frontReading = async () => frontLoad(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text());

async function startFront(enginePort: number, options: Partial<FrontOptions> = {}, model?: ServedModel) {
  const front = await startHarnessFront(enginePort, options, model);
  metricsPort = front.metricsPort;
  return front.url;
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
    // Answered: none in the front once HAProxy has seen the last connection close (it counts a stream until then, a
    // moment after the client has its answer); two more taken, the two turned away.
    const after = await waitFor('the front emptied', 5_000, async () => {
      const reading = await frontReading();
      return reading?.inFlight === 0 && reading;
    });
    expect(after).toEqual({ inFlight: 0, requests: holding!.requests + 2 });
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
    const server = (address: string, revision = 'r1', weight = 100) => ({ revision, address, weight });
    const base = { ...FRONT_DEFAULTS, bind: ':8000', servers: [server('m-engine.models.svc:8000')] };
    expect(frontConfig(base)).toContain('server r1 m-engine.models.svc:8000 weight 100 maxconn 1024');
    expect(() => frontConfig({ ...base, holdSeconds: 0 })).toThrow(/holdSeconds must be a whole number above 0/);
    expect(() => frontConfig({ ...base, servers: [server('x; rm -rf')] })).toThrow(/<host>:<port>/);
    expect(() => frontConfig({ ...base, servers: [server(':8000')] })).toThrow(/<host>:<port>/);
    expect(() => frontConfig({ ...base, servers: [server('a:1', 'engine')] })).toThrow(/r<n>/);
    expect(() => frontConfig({ ...base, servers: [server('a:1', 'r1', 101)] })).toThrow(/weight 0-100/);
    expect(() => frontConfig({ ...base, servers: [server('a:1'), server('b:1')] })).toThrow(/each revision once/);
    expect(() => frontConfig({ ...base, servers: [server('a:1', 'r1', 0)] })).toThrow(/a weight above 0/);
    expect(() => frontConfig({ ...base, servers: [] })).toThrow(/a weight above 0/);
    expect(() => frontConfig({ ...base, metricsBind: 'any' })).toThrow(/<host>:<port>/);
    expect(() => frontConfig({ ...base, readyPath: '/ready' })).toThrow(/needs metricsBind/);
    expect(() => frontConfig({ ...base, metricsBind: ':9101', readyPath: '/r; x' })).toThrow(/plain path/);
    expect(frontLoad('haproxy_backend_current_sessions{proxy="engine"} 2\n')).toBeUndefined();
  });
});
