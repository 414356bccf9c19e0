import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineSimSupervisor } from '../../../deploy/engine-sim/supervisor.js';
import { useNamespace } from '../../support/fixtures.js';
import { restrictedPod, waitFor } from '../../support/kube.js';

// The supervisor gives each simulated engine pod a stand-in on loopback, started with the pod's own vLLM args and
// API key, and publishes the model's endpoint; this is what makes the health path real in local runs.
const kube = useNamespace('stack-sim');
let supervisor: EngineSimSupervisor;
const file = join(mkdtempSync(join(tmpdir(), 'ferry-sim-')), 'endpoints.json');
const overrides = () => JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;

beforeAll(() => {
  supervisor = new EngineSimSupervisor(kube.core, file);
});
afterAll(async () => {
  await supervisor.stop();
});

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
});
