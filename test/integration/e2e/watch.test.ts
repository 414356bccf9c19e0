// The watch that reconciles, end to end: a real worker process (its watch on), the CLI, the local control plane. The
// model runs with the default options, so its safety-net look is hours away: everything seen here comes from
// the worker's watch waking the workflow. Reaction times are a benchmark's business (bench/reactions.ts); these
// tests only give them generous bounds.
import { CoordinationV1Api } from '@kubernetes/client-node';
import { Client, Connection } from '@temporalio/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { pvcName } from '../../../activities/builders/index.js';
import { workflowIdFor, type ModelStatus } from '../../../workflows/contract/index.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import type { Doc } from '../../support/workflow-harness.js';
import { expectOk, ferryJson, uniqueCluster } from '../../support/e2e.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';
import { readLocalEnv } from '../../support/local-env.js';

const kube = useNamespace('e2e-watch', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('watch');
/** The workers share the waking by the namespace's Lease, as the chart's do with more than one replica. */
const LEASED = { FERRY_WATCH_LEASE: 'on' };

beforeAll(async () => {
  await startWorkerProcess(cluster, undefined, undefined, LEASED);
}, 180_000);

const ref = (name: string) => [name, '-n', kube.ns, '--cluster', cluster];
const status = (name: string) => ferryJson<ModelStatus>(['status', ...ref(name)]);

async function serve(name: string): Promise<ModelStatus> {
  const doc: Doc = {
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
      engine: { startupTimeout: '3m' },
      puller: { deadline: '5m' },
    },
  };
  expectOk(await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '4m']), 'ferry serve');
  return await status(name);
}

describe('the watch that reconciles, end to end', { timeout: 300_000 }, () => {
  it('restores a deleted Service and a hand-scaled Deployment, and says so in the timeline', async () => {
    await serve('mend');
    const before = await kube.core.readNamespacedService({ name: 'mend', namespace: kube.ns });
    await kube.core.deleteNamespacedService({ name: 'mend', namespace: kube.ns });
    const restored = await waitFor('the Service to be back', 20_000, async () => {
      const svc = await kube.core.readNamespacedService({ name: 'mend', namespace: kube.ns }).catch(() => undefined);
      return svc && svc.metadata?.uid !== before.metadata?.uid ? svc : undefined;
    });
    expect(restored.spec?.selector).toEqual(before.spec?.selector);

    // What `kubectl scale --replicas 3` does: a write to the scale subresource.
    await kube.apps.replaceNamespacedDeploymentScale({
      name: 'mend',
      namespace: kube.ns,
      body: { metadata: { name: 'mend', namespace: kube.ns }, spec: { replicas: 3 } },
    });
    await waitFor('the Deployment back at 1 replica', 20_000, async () => {
      const d = await kube.apps.readNamespacedDeployment({ name: 'mend', namespace: kube.ns });
      return d.spec?.replicas === 1;
    });
    const s = await waitFor('both repairs in the timeline', 20_000, async () => {
      const st = await status('mend');
      return st.timeline.filter((e) => e.step === 'repair').length >= 2 ? st : undefined;
    });
    const repairs = s.timeline.filter((e) => e.step === 'repair').map((e) => e.detail);
    expect(repairs[0]).toBe('Service/mend deleted; re-applied');
    expect(repairs[1]).toMatch(/^Deployment\/mend scaled to 3 by .+; back to 1$/);
  });

  it('shows Degraded when the engine pod is deleted, and Ready again once its replacement serves', async () => {
    await serve('blink');
    const [pod] = (await kube.core.listNamespacedPod({ namespace: kube.ns, labelSelector: 'ferry.dev/model=blink' }))
      .items;
    await kube.core.deleteNamespacedPod({ name: pod!.metadata!.name!, namespace: kube.ns });
    const back = await waitFor('Degraded, then Ready again', 60_000, async () => {
      const st = await status('blink');
      const degraded = st.timeline.find((e) => e.step === 'degraded');
      return st.phase === 'Ready' && degraded?.outcome === 'Succeeded' ? st : undefined;
    });
    expect(back.timeline.find((e) => e.step === 'degraded')!.detail).toMatch(/^ReplicasUnavailable|^Unhealthy/);
    expect(back.readyReplicas).toBe(1);
  });

  it('re-provisions and re-pulls a weights volume someone deletes, back to Ready unaided', async () => {
    await serve('anchor');
    const old = await kube.core.readNamespacedPersistentVolumeClaim({ name: pvcName('anchor'), namespace: kube.ns });
    await kube.core.deleteNamespacedPersistentVolumeClaim({ name: pvcName('anchor'), namespace: kube.ns });
    const rebuilt = await waitFor('Ready on a new volume', 120_000, async () => {
      const st = await status('anchor');
      const pvc = await kube.core
        .readNamespacedPersistentVolumeClaim({ name: pvcName('anchor'), namespace: kube.ns })
        .catch(() => undefined);
      return st.phase === 'Ready' && pvc && pvc.metadata?.uid !== old.metadata?.uid ? st : undefined;
    });
    expect(rebuilt.generation).toBe(1);
    const update = rebuilt.timeline.filter((e) => e.step === 'update').at(-1)!;
    expect(update.detail).toMatch(/^generation 1: rebuild \(the weights volume .* is being deleted/);
    expect(update.outcome).toBe('Succeeded');
    expect(rebuilt.timeline.filter((e) => e.step === 'download').map((e) => e.outcome)).toEqual([
      'Succeeded',
      'Succeeded',
    ]);
  });

  it('repairs once with a second worker on the same task queue, woken by one of them (the Lease)', async () => {
    await startWorkerProcess(cluster, undefined, undefined, LEASED);
    await serve('twice');
    const before = await kube.core.readNamespacedService({ name: 'twice', namespace: kube.ns });
    await kube.core.deleteNamespacedService({ name: 'twice', namespace: kube.ns });
    await waitFor('the Service to be back', 20_000, async () => {
      const svc = await kube.core.readNamespacedService({ name: 'twice', namespace: kube.ns }).catch(() => undefined);
      return svc && svc.metadata?.uid !== before.metadata?.uid;
    });
    // Let any second wake arrive and be looked at: none should come, and a look would find nothing to repair.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const st = await status('twice');
    expect(st.phase).toBe('Ready');
    expect(st.timeline.filter((e) => e.step === 'repair').map((e) => e.detail)).toEqual([
      'Service/twice deleted; re-applied',
    ]);
    // Both watch; the wakes all came from one worker, the one holding the namespace's Lease.
    const connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
    try {
      const history = await new Client({ connection }).workflow
        .getHandle(workflowIdFor({ cluster, namespace: kube.ns, name: 'twice' }))
        .fetchHistory();
      const wakers = (history.events ?? []).flatMap((e) => {
        const a = e.workflowExecutionSignaledEventAttributes;
        return a?.signalName === 'ferry.modelChanged' ? [a.identity ?? ''] : [];
      });
      expect(wakers.length).toBeGreaterThan(0);
      expect(new Set(wakers).size).toBe(1);
    } finally {
      await connection.close();
    }
    const lease = await kube.kc
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: `ferry-watch-${cluster}`, namespace: kube.ns });
    expect(lease.spec?.holderIdentity).toMatch(/^.+-\d+-[0-9a-f]{6}$/);
  });
});
