// The load baseline end to end: a real worker process measures one replica's stand-in (the supervisor's, one per
// engine pod) by streaming requests to it directly, and records the highest concurrency within the goal. The
// stand-in's capacity model (deploy/engine-sim/README.md) predicts the answer: with a time-to-first-token goal
// shorter than one whole request, every request beyond --max-num-seqs waits too long, so the capacity is
// --max-num-seqs. What is simulated: the pods (KWOK) and the engine (the stand-in); the measurement is real HTTP.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ModelStatus } from '../../../workflows/contract/index.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import type { Doc } from '../../support/workflow-harness.js';
import { expectOk, ferryJson, uniqueCluster } from '../../support/e2e.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';
import { repoRoot } from '../../support/local-env.js';
import { streamOnce } from '../../../bench/lib.js';
import { beforeAll } from 'vitest';

const kube = useNamespace('e2e-baseline', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('baseline');

beforeAll(async () => {
  await startWorkerProcess(cluster);
}, 180_000);

const NAME = 'measured';
const status = () => ferryJson<ModelStatus>(['status', NAME, '-n', kube.ns, '--cluster', cluster]);

/** 20 ms a token, 32 tokens: one request takes about 640 ms, far beyond the 300 ms allowed to its first token. */
const doc = (maxNumSeqs: number, labels: Record<string, string> = {}): Doc => ({
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: {
    name: NAME,
    namespace: kube.ns,
    labels: { 'sim.ferry.dev/load-delay-seconds': '0', 'sim.ferry.dev/complete-delay': '1s', ...labels },
  },
  spec: {
    cluster,
    source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
    resources: { gpus: 0 },
    engine: {
      startupTimeout: '3m',
      args: [`--max-num-seqs=${maxNumSeqs}`],
      env: [{ name: 'FERRY_SIM_TOKEN_DELAY_MS', value: '20' }],
    },
    puller: { deadline: '5m' },
    slo: {
      ttft: '300ms',
      itl: '100ms',
      workload: { promptTokens: 16, outputTokens: 32 },
      maxConcurrency: 32,
    },
  },
});

/** The model's URL as the supervisor publishes it: what the Service reaches, through admission. */
function modelUrl(): string {
  const urls = JSON.parse(readFileSync(join(repoRoot, '.ferry/run/endpoints.json'), 'utf8')) as Record<string, string>;
  return urls[`${kube.ns}/${NAME}`] ?? '';
}

describe('the load baseline, end to end', { timeout: 420_000 }, () => {
  it('measures --max-num-seqs within one, admits that many and turns the rest away with 429, keeps it across a label change, and measures again on new engine args', async () => {
    expectOk(await runFerry(['serve', '-f', writeDoc(doc(8)), '--wait', '--timeout', '5m']), 'serve');
    const served = await status();
    expect(served.phase).toBe('Ready');
    const first = served.baseline!;
    expect(first.maxConcurrency).toBeGreaterThanOrEqual(7);
    expect(first.maxConcurrency).toBeLessThanOrEqual(9);
    expect(first).toMatchObject({ capped: false, generation: 1, shape: { promptTokens: 16, outputTokens: 32 } });
    expect(first.ttftP95Ms).toBeLessThanOrEqual(300);
    // Doubling up to the limit, then halving between the last pass and the first fail. On a loaded machine the stand-in
    // can miss the TTFT bound at 8 (CI once measured `1✓ 2✓ 4✓ 8✗ 6✓ 7✓`): the result, within one, is what counts.
    expect(first.probes).toMatch(/^1✓ 2✓ 4✓ (8✓ 16✗|8✗ 6✓ 7[✓✗])/);
    expect(first.probes).toMatch(new RegExp(`\\b${first.maxConcurrency}✓`));
    expect(first.pod).toMatch(new RegExp(`^${NAME}-`));
    const shown = await runFerry(['status', NAME, '-n', kube.ns, '--cluster', cluster]);
    expect(shown.stdout).toMatch(/baseline: +\d+ requests at once per replica meet ttft ≤ 300ms and itl ≤ 100ms/);

    // Admission: the sidecar's ConfigMap holds the measured limit; through the model's URL (the Service's stand-in:
    // Debian's nginx in front of the pod's stand-in), twice that many at once get that many answers and 429s for
    // the rest with Retry-After, before any admitted answer has ended. Whether the admitted meet the goal's times is
    // the benchmark's to say (bench/baseline.ts, its slice runs alone): here three other test files share two cores.
    const config = await kube.core.readNamespacedConfigMap({ name: `${NAME}-admission`, namespace: kube.ns });
    expect(config.data?.['max-concurrency']).toBe(String(first.maxConcurrency));
    const limit = first.maxConcurrency;
    const burst = await waitFor('the replica to admit its measured concurrency', 20_000, async () => {
      const results = await Promise.all(Array.from({ length: 2 * limit }, () => streamOnce(modelUrl())));
      return results.filter((r) => r.status === 200).length === limit ? results : undefined;
    });
    const turnedAway = burst.filter((r) => r.status === 429);
    const admitted = burst.filter((r) => r.status === 200);
    expect(turnedAway).toHaveLength(limit);
    const firstAdmittedEnd = Math.min(...admitted.map((r) => r.totalMs));
    for (const r of turnedAway) {
      expect(r.retryAfter).toBe('1');
      expect(r.ms).toBeLessThan(firstAdmittedEnd);
      expect(JSON.parse(r.body)).toMatchObject({ error: { type: 'TooManyRequests', code: 429 } });
    }
    for (const r of admitted) expect(r.done).toBe(true);

    // A label cannot move the capacity: the baseline is kept, and the step says why.
    expectOk(
      await runFerry(['update', '-f', writeDoc(doc(8, { team: 'search' })), '--wait', '--timeout', '3m']),
      'label',
    );
    const relabelled = await status();
    expect(relabelled.baseline).toEqual(first);
    expect(relabelled.timeline.filter((e) => e.step === 'baseline').at(-1)).toMatchObject({
      generation: 2,
      outcome: 'Skipped',
    });

    // New engine args can: measured again, on the new pod.
    expectOk(
      await runFerry(['update', '-f', writeDoc(doc(4, { team: 'search' })), '--wait', '--timeout', '5m']),
      'args',
    );
    const remeasured = (await status()).baseline!;
    expect(remeasured.generation).toBe(3);
    expect(remeasured.measuredAt > first.measuredAt).toBe(true);
    expect(remeasured.maxConcurrency).toBeGreaterThanOrEqual(3);
    expect(remeasured.maxConcurrency).toBeLessThanOrEqual(5);
    expect(remeasured.pod).not.toBe(first.pod);
    const reconfigured = await kube.core.readNamespacedConfigMap({ name: `${NAME}-admission`, namespace: kube.ns });
    expect(reconfigured.data?.['max-concurrency']).toBe(String(remeasured.maxConcurrency));

    expectOk(await runFerry(['delete', NAME, '-n', kube.ns, '--cluster', cluster, '--wait']), 'delete');
    const left = await kube.core.listNamespacedConfigMap({
      namespace: kube.ns,
      labelSelector: `ferry.dev/model=${NAME}`,
    });
    expect(left.items.filter((c) => !c.metadata?.deletionTimestamp).map((c) => c.metadata?.name)).toEqual([]);
  });
});
