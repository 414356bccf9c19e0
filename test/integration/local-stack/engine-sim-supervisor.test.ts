import { mkdtempSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frontConfigFor } from '../../../activities/builders/front-objects.js';
import { frontLoad } from '../../../activities/scaling/load.js';
import { EngineSimSupervisor } from '../../../deploy/engine-sim/supervisor.js';
import { testModel } from '../../support/activity-env.js';
import { adaptersListed } from '../../support/engine-env.js';
import { useNamespace } from '../../support/fixtures.js';
import { restrictedPod, waitFor } from '../../support/kube.js';

// The supervisor gives each simulated engine pod a stand-in on loopback, started with the pod's own vLLM args and
// API key, and publishes the model's endpoint; this is what makes the health path real in local runs. A front pod
// is played by Debian's HAProxy with its own configuration (deploy/engine-sim/front-proxy.ts).
const kube = useNamespace('stack-sim');
// The local stack's supervisor plays these pods too, with its own finalizer: this one's holds them apart from it, and
// it plays this namespace's pods only, so that it holds no other test's.
const FINALIZER = 'sim.ferry.dev/front-process-test';
let supervisor: EngineSimSupervisor;
const file = join(mkdtempSync(join(tmpdir(), 'ferry-sim-')), 'endpoints.json');
const overrides = () => JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;

beforeAll(() => {
  supervisor = new EngineSimSupervisor(kube.core, file, { finalizer: FINALIZER, namespace: kube.ns });
});
afterAll(async () => {
  await supervisor.stop();
});

const podExists = (name: string) =>
  kube.core.readNamespacedPod({ name, namespace: kube.ns }).then(
    () => true,
    () => false,
  );

const engineLabels = {
  'app.kubernetes.io/managed-by': 'ferry',
  'app.kubernetes.io/component': 'engine',
  'ferry.dev/model': 'tiny',
  'sim.ferry.dev/load-delay-seconds': '1',
};

describe('the engine stand-in supervisor', () => {
  it('serves each running engine pod with its own args and API key, and forgets it when the pod goes', async () => {
    await kube.core.createNamespacedSecret({
      namespace: kube.ns,
      body: { metadata: { name: 'key' }, stringData: { token: 's3cret' } },
    });
    const pod = restrictedPod('tiny-0');
    pod.metadata = { name: 'tiny-0', labels: engineLabels };
    pod.spec!.containers[0] = {
      ...pod.spec!.containers[0]!,
      name: 'vllm',
      args: ['--model', '/models/abc', '--served-model-name', 'tiny-chat', '--port', '8000'],
      env: [{ name: 'VLLM_API_KEY', valueFrom: { secretKeyRef: { name: 'key', key: 'token' } } }],
    };
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: pod });

    const url = await waitFor('an endpoint for the model', 30_000, async () => {
      await supervisor.sync();
      return overrides()[`${kube.ns}/tiny`];
    });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await waitFor('/health 200', 10_000, async () => (await fetch(`${url}/health`)).status === 200);

    expect((await fetch(`${url}/v1/models`)).status).toBe(401);
    const models = (await (
      await fetch(`${url}/v1/models`, { headers: { authorization: 'Bearer s3cret' } })
    ).json()) as {
      data: { id: string; root: string }[];
    };
    expect(models.data.map((m) => [m.id, m.root])).toEqual([['tiny-chat', '/models/abc']]);

    await kube.core.deleteNamespacedPod({ name: 'tiny-0', namespace: kube.ns, gracePeriodSeconds: 0 });
    await waitFor('the endpoint to be withdrawn', 30_000, async () => {
      await supervisor.sync();
      return overrides()[`${kube.ns}/tiny`] === undefined;
    });
    await expect(fetch(`${url}/health`)).rejects.toThrow();
  });

  it('gives each pod its own stand-in under <namespace>/<model>/<pod>: an adapter loaded on one is not on the other, and a new pod has none', async () => {
    const enginePod = (name: string) => {
      const pod = restrictedPod(name);
      pod.metadata = { name, labels: { ...engineLabels, 'ferry.dev/model': 'duo' } };
      pod.spec!.containers[0] = {
        ...pod.spec!.containers[0]!,
        name: 'vllm',
        args: ['--model', '/models/abc', '--served-model-name', 'duo', '--port', '8000', '--enable-lora'],
        env: [{ name: 'VLLM_ALLOW_RUNTIME_LORA_UPDATING', value: 'True' }],
      };
      return pod;
    };
    const healthy = async (name: string) => {
      const url = await waitFor(`a stand-in for ${name}`, 30_000, async () => {
        await supervisor.sync();
        return overrides()[`${kube.ns}/duo/${name}`];
      });
      await waitFor(`${name} healthy`, 10_000, async () => (await fetch(`${url}/health`)).status === 200);
      return url;
    };
    for (const name of ['duo-a', 'duo-b'])
      await kube.core.createNamespacedPod({ namespace: kube.ns, body: enginePod(name) });
    const [a, b] = [await healthy('duo-a'), await healthy('duo-b')];
    expect(a).not.toBe(b);
    expect([a, b]).toContain(overrides()[`${kube.ns}/duo`]);

    const load = await fetch(`${a}/v1/load_lora_adapter`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ lora_name: 'sql', lora_path: '/models/adapters/a1b2c3d4' }),
    });
    expect(load.status).toBe(200);
    await load.arrayBuffer();
    expect(await adaptersListed(a)).toEqual(['sql']);
    expect(await adaptersListed(b)).toEqual([]);

    // The pod is replaced (same name, new uid): its new stand-in holds nothing, as a restarted vLLM would.
    await kube.core.deleteNamespacedPod({ name: 'duo-a', namespace: kube.ns, gracePeriodSeconds: 0 });
    await waitFor('duo-a to be gone', 30_000, async () => {
      await supervisor.sync();
      return overrides()[`${kube.ns}/duo/duo-a`] === undefined;
    });
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: enginePod('duo-a') });
    const again = await healthy('duo-a');
    expect(await adaptersListed(again)).toEqual([]);
    expect(await adaptersListed(b)).toEqual([]);
  });

  it('plays a front pod with HAProxy and its own configuration: a request sent while no engine pod runs is held, counted by the exporter, and answered once one does', async () => {
    const model = testModel('held', kube.ns, { spec: { front: { holdFor: '1m' } } });
    await kube.core.createNamespacedConfigMap({
      namespace: kube.ns,
      body: { metadata: { name: 'held-front' }, data: { 'haproxy.cfg': frontConfigFor(model) } },
    });
    const frontPod = restrictedPod('held-front-0', {
      volumes: [{ name: 'config', configMap: { name: 'held-front' } }],
    });
    // The front's own pause before its stop signal (activities/builders/front-objects.ts has 5 s).
    frontPod.spec!.containers[0]!.lifecycle = { preStop: { exec: { command: ['sleep', '2'] } } };
    frontPod.metadata = {
      name: 'held-front-0',
      labels: { ...engineLabels, 'app.kubernetes.io/component': 'front', 'ferry.dev/model': 'held' },
    };
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: frontPod });
    const front = await waitFor('the front played', 30_000, async () => {
      await supervisor.sync();
      return overrides()[`${kube.ns}/held`];
    });
    const exporter = overrides()[`${kube.ns}/held/held-front-0`]!;
    expect(overrides()[`${kube.ns}/held-engine`]).toBeUndefined();
    const reading = async () => frontLoad(await (await fetch(`${exporter}/metrics`)).text());
    expect(await reading()).toEqual({ inFlight: 0, requests: 0 });

    // No engine pod: the request is held, not refused.
    const answer = fetch(`${front}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'held', prompt: 'hello', max_tokens: 4 }),
    });
    await waitFor('the request held', 10_000, async () => (await reading())?.inFlight === 1);

    const enginePod = restrictedPod('held-0');
    enginePod.metadata = { name: 'held-0', labels: { ...engineLabels, 'ferry.dev/model': 'held' } };
    enginePod.spec!.containers[0] = {
      ...enginePod.spec!.containers[0]!,
      name: 'vllm',
      args: ['--model', '/models/abc', '--served-model-name', 'held', '--port', '8000'],
    };
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: enginePod });
    let settled: Response | Error | undefined;
    void answer.then(
      (res) => (settled = res),
      (err: Error) => (settled = err),
    );
    await waitFor('the held request answered', 30_000, async () => {
      await supervisor.sync();
      return settled;
    });
    expect(settled).toBeInstanceOf(Response);
    const res = settled as Response;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: unknown[] }).choices).toHaveLength(1);
    // The worker's own requests name the engine's Service; the model's URL stays the front's.
    expect(overrides()[`${kube.ns}/held-engine`]).toBe(overrides()[`${kube.ns}/held/held-0`]);
    expect(overrides()[`${kube.ns}/held`]).toBe(front);
    expect(await reading()).toMatchObject({ inFlight: 0, requests: 1 });

    await kube.core.deleteNamespacedPod({ name: 'held-front-0', namespace: kube.ns, gracePeriodSeconds: 0 });
    await waitFor('the front stopped', 30_000, async () => {
      await supervisor.sync();
      return overrides()[`${kube.ns}/held/held-front-0`] === undefined;
    });
    // Forgotten by the model's Service at once, it still takes connections through its preStop pause, then stops;
    // its pod stays in the API (Terminating) until its HAProxy has exited, as a kubelet keeps it.
    expect((await fetch(`${exporter}/ready`)).status).toBe(200);
    const terminating = await kube.core.readNamespacedPod({ name: 'held-front-0', namespace: kube.ns });
    expect(terminating.metadata?.deletionTimestamp).toBeDefined();
    expect(terminating.metadata?.finalizers).toContain(FINALIZER);
    await waitFor('the front stopped after its pause', 15_000, async () =>
      fetch(`${exporter}/metrics`).then(
        () => false,
        () => true,
      ),
    );
    await waitFor('the pod gone once its HAProxy exited', 15_000, async () => !(await podExists('held-front-0')));
    // Without a front the model's URL stays (a Service's address does not change) and reaches the engine itself.
    expect(overrides()[`${kube.ns}/held`]).toBe(front);
    expect(overrides()[`${kube.ns}/held-engine`]).toBeUndefined();
    const direct = await fetch(`${front}/v1/models`);
    expect(((await direct.json()) as { data: { id: string }[] }).data.map((m) => m.id)).toEqual(['held']);
  });

  it('replaces a front pod that KWOK swapped before a pass without a moment in which the model refuses a connection', async () => {
    const model = testModel('swapped', kube.ns, { spec: { front: { holdFor: '1m' } } });
    await kube.core.createNamespacedConfigMap({
      namespace: kube.ns,
      body: { metadata: { name: 'swapped-front' }, data: { 'haproxy.cfg': frontConfigFor(model) } },
    });
    const frontPod = (name: string) => {
      const pod = restrictedPod(name, { volumes: [{ name: 'config', configMap: { name: 'swapped-front' } }] });
      pod.metadata = {
        name,
        labels: { ...engineLabels, 'app.kubernetes.io/component': 'front', 'ferry.dev/model': 'swapped' },
      };
      return pod;
    };
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: frontPod('swapped-front-a') });
    const url = await waitFor('the first front played', 30_000, async () => {
      await supervisor.sync();
      return overrides()[`${kube.ns}/swapped/swapped-front-a`] && overrides()[`${kube.ns}/swapped`];
    });
    // A rolling update as KWOK runs it: the new pod Ready at once and the old one deleted, both before the next pass.
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: frontPod('swapped-front-b') });
    await waitFor('the new pod running', 30_000, async () => {
      const pod = await kube.core.readNamespacedPod({ name: 'swapped-front-b', namespace: kube.ns });
      return pod.status?.phase === 'Running';
    });
    await kube.core.deleteNamespacedPod({ name: 'swapped-front-a', namespace: kube.ns, gracePeriodSeconds: 0 });

    // Connections to the model's port all through the pass that swaps its fronts (no engine: a front holds them).
    const port = Number(new URL(url).port);
    const refused: string[] = [];
    let accepted = 0;
    let probing = true;
    const probe = (async () => {
      while (probing) {
        await new Promise<void>((resolve) => {
          const socket = connect(port, '127.0.0.1');
          socket.once('connect', () => {
            // Held open by a front (it waits for a request); closed by the other side first: a Service that took the
            // connection with nowhere to send it.
            const timer = setTimeout(() => {
              accepted++;
              socket.removeAllListeners('close');
              socket.destroy();
              resolve();
            }, 20);
            socket.once('close', () => {
              clearTimeout(timer);
              refused.push('closed unanswered');
              resolve();
            });
          });
          socket.once('error', (err) => {
            refused.push(err.message);
            resolve();
          });
        });
      }
    })();
    await waitFor('the second front played, the first forgotten', 30_000, async () => {
      await supervisor.sync();
      const now = overrides();
      return now[`${kube.ns}/swapped/swapped-front-b`] && !now[`${kube.ns}/swapped/swapped-front-a`];
    });
    probing = false;
    await probe;
    expect(overrides()[`${kube.ns}/swapped`]).toBe(url);
    expect(refused).toEqual([]);
    expect(accepted).toBeGreaterThan(2);
  });

  it('lets go a deleted front pod held by a supervisor that no longer plays it', async () => {
    // Held as a supervisor that stopped or restarted left it; it runs nowhere (no node has this label), so none plays it.
    const pod = restrictedPod('stray-front-0');
    pod.metadata = {
      name: 'stray-front-0',
      labels: { ...engineLabels, 'app.kubernetes.io/component': 'front', 'ferry.dev/model': 'stray' },
      finalizers: [FINALIZER],
    };
    pod.spec!.nodeSelector = { 'sim.ferry.dev/nowhere': 'true' };
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: pod });
    await kube.core.deleteNamespacedPod({ name: 'stray-front-0', namespace: kube.ns, gracePeriodSeconds: 0 });
    expect(await podExists('stray-front-0')).toBe(true);
    await waitFor('the stray pod let go', 30_000, async () => {
      await supervisor.sync();
      return !(await podExists('stray-front-0'));
    });
  });
});
