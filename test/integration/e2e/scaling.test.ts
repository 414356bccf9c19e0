// Autoscaling end to end (docs/design/scaling.md): a real worker process reads each ready replica's /metrics (the
// supervisor's stand-in for each simulated pod), decides on the requests in flight, and signals the model's workflow,
// which sets the Deployment's count. What is simulated: the pods (KWOK) and the engine (the stand-in, whose
// vllm:num_requests_running / _waiting the conformance suite checks against the real vLLM); the requests, the
// readings, the decisions and the Kubernetes objects are real.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { streamOnce } from '../../../bench/lib.js';
import type { ModelStatus } from '../../../workflows/contract/index.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import type { Doc } from '../../support/workflow-harness.js';
import { expectOk, ferryJson, uniqueCluster } from '../../support/e2e.js';
import { RESTRICTED, useNamespace, useOwnNode, useWorkerProcesses } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';
import { repoRoot } from '../../support/local-env.js';

const kube = useNamespace('e2e-scaling', RESTRICTED);
/** The first test counts the GPUs of a node: one no other test's pods take GPUs on. */
const node = useOwnNode();
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('scaling');

/** A reading a second: the windows below are seconds long. */
const startWorker = () => startWorkerProcess(cluster, undefined, undefined, { FERRY_SCALING_INTERVAL: '1s' });
let worker: Awaited<ReturnType<typeof startWorker>>;

beforeAll(async () => {
  worker = await startWorker();
}, 180_000);

const NAME = 'busy';
const status = (name = NAME) => ferryJson<ModelStatus>(['status', name, '-n', kube.ns, '--cluster', cluster]);
const deployment = (name = NAME) => kube.apps.readNamespacedDeployment({ name, namespace: kube.ns });

/**
 * Two GPUs a replica, each simulated node has four, and a ReadWriteOnce volume keeps every replica on the first one's
 * node: a third replica cannot be scheduled. 50 ms a token.
 */
const doc = (name = NAME, gpus = 2, scheduling?: object): Doc => ({
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: {
    name,
    namespace: kube.ns,
    labels: { 'sim.ferry.dev/load-delay-seconds': '0', 'sim.ferry.dev/complete-delay': '1s' },
  },
  spec: {
    cluster,
    source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
    resources: { gpus },
    engine: { startupTimeout: '3m', env: [{ name: 'FERRY_SIM_TOKEN_DELAY_MS', value: '50' }] },
    puller: { deadline: '5m' },
    ...(scheduling ? { scheduling } : {}),
    scaling: { minReplicas: 1, maxReplicas: 3, targetConcurrency: 2, scaleUpAfter: '3s', scaleDownAfter: '8s' },
  },
});

/** The URL of the model's first pod's own stand-in, as the supervisor publishes it. */
async function firstPodUrl(name: string): Promise<string> {
  const [pod] = (await kube.core.listNamespacedPod({ namespace: kube.ns, labelSelector: `ferry.dev/model=${name}` }))
    .items;
  return await waitFor("the pod's stand-in", 30_000, async () => {
    const file = join(repoRoot, '.ferry/run/endpoints.json');
    const urls = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
    return urls[`${kube.ns}/${name}/${pod!.metadata!.name!}`];
  });
}

/** Keeps `inFlight` streamed completions running against `url` (each about 2 s) until `stop()`; counts failures. */
function steadyLoad(url: string, inFlight: number) {
  let stopped = false;
  let failed = 0;
  let answered = 0;
  const lanes = Array.from({ length: inFlight }, async () => {
    while (!stopped) {
      const r = await streamOnce(url, 40).catch(() => undefined);
      if (r?.status === 200 && r.done) answered++;
      else failed++;
    }
  });
  return {
    stop: async () => {
      stopped = true;
      await Promise.all(lanes);
      return { answered, failed };
    },
  };
}

/** The decisions of the timeline, `[from, to]` each. */
const movesOf = (s: ModelStatus): [number, number][] =>
  s.timeline
    .filter((e) => e.step === 'scale')
    .map(
      (e) =>
        /^(\d+) → (\d+) replicas/
          .exec(e.detail ?? '')!
          .slice(1, 3)
          .map(Number) as [number, number],
    );

/**
 * What a well-formed run of decisions is: from 1, each made against the count the one before it left, rising to
 * `peak` and then only falling. Returns `moves` when it is one, else the moves it should have been (for the diff).
 */
function upThenDown(moves: [number, number][], peak: number): [number, number][] {
  let at = 1;
  let falling = false;
  for (const [from, to] of moves) {
    if (from !== at || to === from || (falling && to > from) || to > peak) return [[-1, -1]];
    if (to < from) falling = true;
    at = to;
  }
  return moves.some(([, to]) => to === peak) ? moves : [[-1, -1]];
}

describe('autoscaling on the requests in flight, end to end', { timeout: 420_000 }, () => {
  it('scales out under load, stays Ready while a replica waits for a GPU, and scales back to minReplicas', async () => {
    expectOk(
      await runFerry(['serve', '-f', writeDoc(doc(NAME, 2, node.scheduling)), '--wait', '--timeout', '4m']),
      'serve',
    );
    const served = await status();
    expect(served).toMatchObject({ phase: 'Ready', replicas: 1 });
    expect(served.scaling).toMatchObject({ replicas: 1, minReplicas: 1, maxReplicas: 3, targetConcurrency: 2 });
    const policy = JSON.parse((await deployment()).metadata!.annotations!['ferry.dev/scaling']!) as unknown;
    expect(policy).toEqual({
      minReplicas: 1,
      maxReplicas: 3,
      targetConcurrency: 2,
      scaleUpAfterMs: 3_000,
      scaleDownAfterMs: 8_000,
    });

    // Eight requests in flight on the one replica, target two each: four, within the bound of three.
    const load = steadyLoad(await firstPodUrl(NAME), 8);
    const started = Date.now();
    const out = await waitFor('the Deployment at 3 replicas', 60_000, async () => {
      const d = await deployment();
      return d.spec?.replicas === 3 ? d : undefined;
    });
    const scaledOutMs = Date.now() - started;
    // Held for scaleUpAfter first: not sooner than 3 s.
    expect(scaledOutMs).toBeGreaterThanOrEqual(3_000);
    expect(out.spec?.template).toEqual((await deployment()).spec?.template);
    const scaled = await waitFor('the decision in status', 20_000, async () => {
      const s = await status();
      return s.scaling?.replicas === 3 ? s : undefined;
    });
    expect(scaled.scaling?.lastDecision).toMatchObject({ to: 3 });
    expect(scaled.scaling?.lastDecision?.reason).toMatch(/load/);
    expect(scaled.timeline.filter((e) => e.step === 'scale').at(-1)?.detail).toMatch(/^[12] → 3 replicas: /);

    // The third replica finds no GPU on its node (the file's own: no other test's pods hold GPUs there):
    // Unschedulable, and the model still Ready.
    await waitFor('a replica Unschedulable', 60_000, async () => {
      const pods = await kube.core.listNamespacedPod({ namespace: kube.ns, labelSelector: `ferry.dev/model=${NAME}` });
      return pods.items.some((p) =>
        p.status?.conditions?.some((c) => c.type === 'PodScheduled' && c.reason === 'Unschedulable'),
      );
    });
    await waitFor(
      'a second replica ready',
      120_000,
      async () => ((await deployment()).status?.readyReplicas ?? 0) >= 2,
    );
    expect((await status()).phase).toBe('Ready');
    const placed = await kube.core.listNamespacedPod({ namespace: kube.ns, labelSelector: `ferry.dev/model=${NAME}` });
    expect(new Set(placed.items.flatMap((p) => p.spec?.nodeName ?? []))).toEqual(new Set([node.name]));

    // The load ends: after scaleDownAfter, down in steps of at most half, to minReplicas; the unschedulable replica
    // does not hold it up.
    const { answered, failed } = await load.stop();
    expect(failed).toBe(0);
    expect(answered).toBeGreaterThan(5);
    await waitFor('the Deployment back at 1 replica', 90_000, async () => (await deployment()).spec?.replicas === 1);
    // Ready at one replica (a look in the moment the removed replica left its Service asks the engine twice).
    let last: Awaited<ReturnType<typeof status>> | undefined;
    const after = await waitFor('status Ready at 1 replica, 1 ready', 30_000, async () => {
      last = await status();
      return last.scaling?.replicas === 1 && last.readyReplicas === 1 && last.phase === 'Ready' ? last : undefined;
    }).catch((err: Error) => {
      throw new Error(
        `${err.message}; the last status: ${JSON.stringify({ ...last, timeline: last?.timeline.slice(-6) })}`,
      );
    });
    const decisions = movesOf(after);
    expect(decisions).toEqual(upThenDown(decisions, 3));
    expect(decisions.slice(-2)).toEqual([
      [3, 2],
      [2, 1],
    ]);
    expect(after.scaling?.decisions).toBe(decisions.length);
    // Two GPUs a ready replica: one, then two, then one again, all counted.
    expect(after.usage?.gpus).toBe(2);
    expect(after.usage?.gpuSeconds).toBeGreaterThan(0);
  });

  it('applies a decision sent just before its worker was killed, once, and the next worker goes on', async () => {
    const name = 'restarted';
    expectOk(await runFerry(['serve', '-f', writeDoc(doc(name, 1)), '--wait', '--timeout', '4m']), 'serve');
    const load = steadyLoad(await firstPodUrl(name), 8);
    // The decision is in the workflow's history once the signal is answered: the worker dies right after.
    const sent = (line: string) => line.includes('scale decision sent') && line.includes(`"${kube.ns}/${name}"`);
    await waitFor('a decision sent', 60_000, async () => worker.log().split('\n').some(sent));
    await worker.kill();
    worker = await startWorker();
    await waitFor('the Deployment at 3 replicas', 60_000, async () => (await deployment(name)).spec?.replicas === 3);
    const out = await waitFor('the decision in status', 30_000, async () => {
      const s = await status(name);
      return s.scaling?.replicas === 3 ? s : undefined;
    });
    // The new worker read the same load and decided again, against a count the first decision had changed, or in
    // time to replace it: either way one decision applied.
    await load.stop();
    const back = await waitFor('back at 1 replica', 90_000, async () => {
      const s = await status(name);
      return s.scaling?.replicas === 1 ? s : undefined;
    });
    // Each decision made against the count the one before it left: none applied twice.
    const ups = movesOf(out);
    expect(ups).toEqual(upThenDown(ups, 3));
    expect(ups.at(-1)).toEqual([ups.length === 1 ? 1 : 2, 3]);
    expect(back.scaling?.decisions).toBe(movesOf(back).length);
    expect(back.phase).toBe('Ready');
  });

  it('a schedule window raises the count, the autoscaler keeps above it while open, and brings it down after', async () => {
    // A window every minute, open 20 s: it opens within the next minute whenever the model is Ready.
    const name = 'scheduled';
    const scheduled = doc(name, 1);
    scheduled.spec.scaling = {
      ...scheduled.spec.scaling,
      schedule: [{ cron: '* * * * *', minReplicas: 2, for: '20s' }],
    };
    expectOk(await runFerry(['serve', '-f', writeDoc(scheduled), '--wait', '--timeout', '4m']), 'serve');
    const policyOf = async () =>
      JSON.parse((await deployment(name)).metadata!.annotations!['ferry.dev/scaling']!) as { minReplicas: number };
    // Read together: on a loaded machine the floor can be applied late in a window, so the status read after it may
    // already be the closed one; a window that passes unseen is followed by the next, a minute on.
    const open = await waitFor('the window open: the Deployment at 2, the status saying so', 150_000, async () => {
      const d = await deployment(name);
      if (d.spec?.replicas !== 2 || (await policyOf()).minReplicas !== 2) return undefined;
      const s = await status(name);
      return s.scaling?.schedule?.minReplicas === 2 ? s : undefined;
    });
    expect(open.scaling).toMatchObject({ minReplicas: 2, schedule: { minReplicas: 2, nextMinReplicas: 1 } });
    // The window closes at second 20; quiet for scaleDownAfter (8 s), the autoscaler brings it down.
    const closed = await waitFor('the window closed: the Deployment back at 1', 60_000, async () => {
      const d = await deployment(name);
      if (d.spec?.replicas !== 1 || (await policyOf()).minReplicas !== 1) return undefined;
      const s = await status(name);
      return s.scaling?.replicas === 1 ? s : undefined;
    });
    expect(closed.scaling).toMatchObject({
      replicas: 1,
      minReplicas: 1,
      schedule: { minReplicas: 1, nextMinReplicas: 2 },
    });
    expect(new Date(closed.scaling!.schedule!.nextChangeAt!).getUTCSeconds()).toBe(0);
    // The autoscaler's step down came after the window closed, never while it was open.
    const down = closed.timeline.filter((e) => e.step === 'scale' && /^2 → 1 replicas: /.test(e.detail ?? ''));
    expect(down.length).toBeGreaterThanOrEqual(1);
    for (const entry of down) expect(new Date(entry.endedAt!).getUTCSeconds()).toBeGreaterThanOrEqual(20);
    expect(closed.phase).toBe('Ready');
  });

  it('goes to zero after idleToZeroAfter with no request (Idle), and a request sent at zero is held by the front and answered', async () => {
    const name = 'sleepy';
    const file = writeDoc({
      ...doc(name, 1),
      spec: {
        ...doc(name, 1).spec,
        front: {},
        scaling: { minReplicas: 1, maxReplicas: 2, targetConcurrency: 2, idleToZeroAfter: '1m' },
      },
    });
    expectOk(await runFerry(['serve', '-f', file, '--wait', '--timeout', '4m']), 'serve');
    // The front's pods are KWOK's; the supervisor plays each with Debian's HAProxy and its own configuration.
    const front = await waitFor("the model's Service played by a front pod", 60_000, async () => {
      const urls = JSON.parse(readFileSync(join(repoRoot, '.ferry/run/endpoints.json'), 'utf8')) as Record<
        string,
        string
      >;
      return urls[`${kube.ns}/${name}-engine`] ? urls[`${kube.ns}/${name}`] : undefined;
    });
    // A minute with no request (the clock starts at the worker's first reading of the front), then zero.
    const idle = await waitFor('Idle at zero', 150_000, async () => {
      const s = await status(name);
      return s.phase === 'Idle' ? s : undefined;
    });
    expect(idle).toMatchObject({ replicas: 0, readyReplicas: 0, scaling: { replicas: 0 } });
    expect(idle.timeline.filter((e) => e.step === 'scale').map((e) => e.detail)).toEqual([
      expect.stringMatching(/^1 → 0 replicas: no request for 1m \d\ds \(idleToZeroAfter 1m 00s\)$/),
    ]);
    expect((await deployment(name)).spec?.replicas).toBe(0);
    await waitFor('the engine pod gone', 60_000, async () => {
      const pods = await kube.core.listNamespacedPod({
        namespace: kube.ns,
        labelSelector: `ferry.dev/model=${name},app.kubernetes.io/component=engine`,
      });
      return pods.items.length === 0;
    });
    // And its stand-in stopped (the supervisor's next pass): a request sent before would reach it and be cut with it.
    await waitFor('the stand-in stopped', 60_000, async () => {
      const urls = JSON.parse(readFileSync(join(repoRoot, '.ferry/run/endpoints.json'), 'utf8')) as object;
      return Object.keys(urls).every((k) => !k.startsWith(`${kube.ns}/${name}/`) || k.includes(`/${name}-front-`));
    });

    // A request at zero: held by the front, which wakes the model, and answered once a replica is ready.
    const started = performance.now();
    const res = await fetch(`${front}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: name, prompt: 'a b c', max_tokens: 4 }),
      signal: AbortSignal.timeout(180_000),
    });
    const body = (await res.json()) as { choices?: unknown[] };
    const answeredAfterMs = performance.now() - started;
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.choices).toHaveLength(1);
    const awake = await waitFor('Ready again', 60_000, async () => {
      const s = await status(name);
      return s.phase === 'Ready' ? s : undefined;
    });
    expect(awake.timeline.filter((e) => e.step === 'scale').map((e) => e.detail)).toEqual([
      expect.stringMatching(/^1 → 0 replicas: /),
      expect.stringMatching(/^0 → 1 replicas: a request held at zero: 0 → 1 at once$/),
    ]);
    expect(awake.scaling?.idleSince).toBeUndefined();
    // The time the request waited: the autoscaler's reading, the decision, the pod, the stand-in.
    console.log(`a request at zero answered after ${Math.round(answeredAfterMs)} ms`);
    expectOk(await runFerry(['delete', name, '-n', kube.ns, '--cluster', cluster, '--wait']), 'delete');
  });
});
