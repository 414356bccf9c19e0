// Autoscaling on the real engine (docs/design/scaling.md): the worker's autoscaler reads a real vLLM's
// vllm:num_requests_running and vllm:num_requests_waiting, decides, and the workflow starts a second real vLLM
// process; when the load ends it goes back to one. The pods are run for real by the local node agent; the model is
// the tiny Llama of examples/tiny.yaml (random weights). And scale to zero: the model goes Idle after a quiet minute,
// and a request sent to its front (Debian's HAProxy, playing the front's pods) wakes a real vLLM that answers it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ModelStatus } from '../../workflows/contract/index.js';
import { expectOk, ferryJson, uniqueCluster } from '../support/e2e.js';
import { runFerry, writeDoc } from '../support/ferry-worker.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../support/fixtures.js';
import { waitFor } from '../support/kube.js';
import { repoRoot } from '../support/local-env.js';
import { realEngineMissing, tinyDoc } from './support.js';

// Three and a half minutes of two real vLLM processes on the machine: run by its own command,
// `npm run test:real-engine:scaling` (a stack started with `npm run local:up -- --engine vllm`), not in CI.
const missing =
  realEngineMissing() ??
  (process.env.FERRY_REAL_ENGINE_SCALING ? undefined : 'runs by its own command: npm run test:real-engine:scaling');
const kube = useNamespace('real-scaling', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('real-scaling');
const NAME = 'tiny-scaled';

const status = () => ferryJson<ModelStatus>(['status', NAME, '-n', kube.ns, '--cluster', cluster]);
const deployment = () => kube.apps.readNamespacedDeployment({ name: NAME, namespace: kube.ns });

async function readyPods(): Promise<V1Pod[]> {
  const pods = await kube.core.listNamespacedPod({
    namespace: kube.ns,
    labelSelector: `ferry.dev/model=${NAME},app.kubernetes.io/component=engine`,
  });
  return pods.items.filter(
    (p) =>
      !p.metadata?.deletionTimestamp &&
      p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true,
  );
}

/** Keeps `lanes` completions of 300 tokens running against `url` until `stop()`; counts the answers and failures. */
function load(url: string, lanes: number) {
  let stopped = false;
  let answered = 0;
  let failed = 0;
  const reasons: string[] = [];
  const running = Array.from({ length: lanes }, async () => {
    while (!stopped) {
      const res = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: NAME, prompt: 'Once upon a time', max_tokens: 300, ignore_eos: true }),
      }).catch((err: Error) => {
        reasons.push(`${err.message}: ${String((err.cause as Error | undefined)?.message ?? '')}`);
        return undefined;
      });
      if (!res) failed++;
      else if (res.ok && (await res.json().catch(() => undefined))) answered++;
      else {
        failed++;
        reasons.push(`${res.status}: ${(await res.text().catch(() => '')).slice(0, 200)}`);
      }
    }
  });
  return {
    stop: async () => {
      stopped = true;
      await Promise.all(running);
      return { answered, failed, reasons };
    },
  };
}

beforeAll(async () => {
  // A reading every second: the windows below are seconds long.
  if (!missing) await startWorkerProcess(cluster, undefined, undefined, { FERRY_SCALING_INTERVAL: '1s' });
}, 180_000);

describe.skipIf(missing)(`autoscaling on the real engine${missing ? ` (skipped: ${missing})` : ''}`, () => {
  it('scales out on vLLM’s own requests in flight, serves from both replicas, and back to one when the load ends', async () => {
    const doc = tinyDoc(kube.ns, cluster, (d) => {
      d.metadata.name = NAME;
      d.spec.engine.args = [...d.spec.engine.args, '--max-num-seqs=4'];
      d.spec.engine.startupTimeout = '10m';
      d.spec.scaling = {
        ...{ minReplicas: 1, maxReplicas: 2, targetConcurrency: 1 },
        ...{ scaleUpAfter: '5s', scaleDownAfter: '20s' },
      };
    });
    expectOk(await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '9m']), 'ferry serve');
    expect(await status()).toMatchObject({ phase: 'Ready', readyReplicas: 1, scaling: { replicas: 1 } });

    // Three completions at a time on the one replica, one each is the target: two replicas (the bound).
    const [first] = await readyPods();
    const traffic = load(`http://${first!.status!.podIP}:8000`, 3);
    const started = Date.now();
    await waitFor('the Deployment at 2 replicas', 120_000, async () => (await deployment()).spec?.replicas === 2);
    const decidedMs = Date.now() - started;
    const out = await status();
    expect(out.scaling?.lastDecision).toMatchObject({ from: 1, to: 2 });
    expect(out.scaling?.lastDecision?.reason).toMatch(/load/);
    // The second replica is a real vLLM that loads the model from the volume and answers.
    const both = await waitFor('two ready replicas', 600_000, async () => {
      const pods = await readyPods();
      return pods.length === 2 ? pods : undefined;
    });
    const readyMs = Date.now() - started;
    const second = both.find((p) => p.metadata!.uid !== first!.metadata!.uid)!;
    const answer = await fetch(`http://${second.status!.podIP}:8000/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: NAME, prompt: 'Hello', max_tokens: 4 }),
    });
    expect(answer.status).toBe(200);
    expect((await status()).phase).toBe('Ready');

    const { answered, failed, reasons } = await traffic.stop();
    expect(failed, reasons.join('; ')).toBe(0);
    expect(answered).toBeGreaterThan(0);
    // Quiet for scaleDownAfter: back to one, the replica that served the load kept or not, the model Ready.
    await waitFor('the Deployment back at 1', 120_000, async () => (await deployment()).spec?.replicas === 1);
    const back = await waitFor('status Ready at 1 replica', 60_000, async () => {
      const s = await status();
      return s.scaling?.replicas === 1 && s.readyReplicas === 1 && s.phase === 'Ready' ? s : undefined;
    });
    expect(back.scaling?.decisions).toBe(2);
    expect(back.timeline.filter((e) => e.step === 'scale').map((e) => e.detail?.split(':')[0])).toEqual([
      '1 → 2 replicas',
      '2 → 1 replicas',
    ]);
    process.stderr.write(
      `real-engine autoscaling: decided in ${(decidedMs / 1000).toFixed(1)} s, second replica ready in ${(readyMs / 1000).toFixed(1)} s, ${answered} completions answered\n`,
    );
    expectOk(await runFerry(['delete', NAME, '-n', kube.ns, '--cluster', cluster, '--wait']), 'ferry delete');
  });

  it(
    'goes to zero after a quiet minute, and a request sent then to the front is answered by a real vLLM that starts for it',
    { timeout: 900_000 },
    async () => {
      const name = 'tiny-sleepy';
      const doc = tinyDoc(kube.ns, cluster, (d) => {
        d.metadata.name = name;
        d.spec.engine.startupTimeout = '10m';
        d.spec.front = {};
        d.spec.scaling = { minReplicas: 1, maxReplicas: 1, targetConcurrency: 4, idleToZeroAfter: '1m' };
      });
      expectOk(await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '9m']), 'ferry serve');
      const statusOf = () => ferryJson<ModelStatus>(['status', name, '-n', kube.ns, '--cluster', cluster]);
      // The front's two pods are the local stack's HAProxy (the engine stand-in supervisor plays KWOK's pods).
      const front = await waitFor("the model's front", 60_000, async () => frontUrl(kube.ns, name));
      await waitFor('Idle at zero', 240_000, async () => (await statusOf()).phase === 'Idle');
      await waitFor('the vLLM process gone', 120_000, async () => {
        const pods = await kube.core.listNamespacedPod({
          namespace: kube.ns,
          labelSelector: `ferry.dev/model=${name},app.kubernetes.io/component=engine`,
        });
        return pods.items.length === 0;
      });

      const started = Date.now();
      const res = await fetch(`${front}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: name, prompt: 'Once upon a time', max_tokens: 8, stream: true }),
        signal: AbortSignal.timeout(9 * 60_000),
      });
      expect(res.status).toBe(200);
      let text = '';
      let firstTokenMs: number | undefined;
      for await (const chunk of res.body!) {
        text += Buffer.from(chunk).toString('utf8');
        if (firstTokenMs === undefined && text.includes('"text"')) firstTokenMs = Date.now() - started;
      }
      expect(text).toContain('[DONE]');
      expect(firstTokenMs).toBeDefined();
      const awake = await waitFor('Ready again', 120_000, async () => {
        const s = await statusOf();
        return s.phase === 'Ready' ? s : undefined;
      });
      expect(awake.timeline.filter((e) => e.step === 'scale').map((e) => e.detail?.split(':')[0])).toEqual([
        '1 → 0 replicas',
        '0 → 1 replicas',
      ]);
      process.stderr.write(
        `real-engine zero → first token: ${(firstTokenMs! / 1000).toFixed(1)} s (the request sent at zero, through the front)\n`,
      );
      expectOk(await runFerry(['delete', name, '-n', kube.ns, '--cluster', cluster, '--wait']), 'ferry delete');
    },
  );
});

/** The front's URL for the model, as the local stack's supervisor publishes it (docs/local-stack.md). */
function frontUrl(ns: string, name: string): string | undefined {
  const urls = JSON.parse(readFileSync(join(repoRoot, '.ferry/run/endpoints.json'), 'utf8')) as Record<string, string>;
  return Object.keys(urls).some((k) => k.startsWith(`${ns}/${name}/${name}-front-`))
    ? urls[`${ns}/${name}`]
    : undefined;
}
