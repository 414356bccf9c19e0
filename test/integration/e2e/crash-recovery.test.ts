import { Client, Connection } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import type { ModelStatus } from '../../../workflows/contract/index.js';
import { expectOk, ferryJson, modelObjects, uniqueCluster } from '../../support/e2e.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';
import { readLocalEnv } from '../../support/local-env.js';
import { privateTemporal } from '../../support/temporal-server.js';

// Durable execution is the point: the worker dying mid-download, or the Temporal server restarting mid-rollout,
// must end in the same Ready model with no duplicate objects, and a `ferry serve --wait` started before the fault
// must ride it out and exit 0 with the Ready model.
const kube = useNamespace('e2e-crash', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();

function writeModel(name: string, cluster: string, labels: Record<string, string>): string {
  return writeDoc({
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: { name, namespace: kube.ns, labels: { 'sim.ferry.dev/load-delay-seconds': '1', ...labels } },
    spec: {
      cluster,
      source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct' } },
      engine: { startupTimeout: '5m' },
      puller: { deadline: '10m' },
    },
  });
}

async function phaseOf(name: string, cluster: string, env?: Record<string, string>): Promise<ModelStatus | undefined> {
  return ferryJson<ModelStatus>(['status', name, '-n', kube.ns, '--cluster', cluster], env).catch(() => undefined);
}

/** One of each object a Ready model owns, and no puller Job or pod left over. */
async function expectExactlyOneOfEach(name: string): Promise<void> {
  const objects = (await modelObjects(kube, kube.ns, name)).filter((o) => !o.startsWith('Pod/'));
  expect(objects).toEqual([
    `ConfigMap/${name}-ferry`,
    `Deployment/${name}`,
    `PersistentVolumeClaim/${name}-weights`,
    `Service/${name}`,
  ]);
  const pods = await kube.core.listNamespacedPod({ namespace: kube.ns, labelSelector: `ferry.dev/model=${name}` });
  expect(pods.items.map((p) => p.metadata?.labels?.['app.kubernetes.io/component'])).toEqual(['engine']);
}

describe('crash recovery', { timeout: 420_000 }, () => {
  it('a worker killed with SIGKILL in the middle of a download is replaced and the model still becomes Ready', async () => {
    const cluster = uniqueCluster('kill');
    const first = await startWorkerProcess(cluster);
    // The simulated download takes 20 s: long enough to kill the worker in the middle of it.
    const file = writeModel('killed', cluster, { 'sim.ferry.dev/complete-delay': '20s' });
    const waiting = runFerry(['serve', '-f', file, '--wait', '-o', 'json']);

    await waitFor(
      'the download to be under way',
      60_000,
      async () => (await phaseOf('killed', cluster))?.phase === 'Downloading',
    );
    await first.kill();

    await startWorkerProcess(cluster);
    // The killed worker's awaitPuller times out on its heartbeat and is retried on the new worker.
    const ready = await waitFor('Ready after the restart', 240_000, async () => {
      const s = await phaseOf('killed', cluster);
      return s?.phase === 'Ready' ? s : undefined;
    });
    expect(ready.timeline.filter((t) => t.step === 'download').map((t) => t.outcome)).toEqual(['Succeeded']);
    const served = expectOk(await waiting, 'ferry serve --wait across the worker restart');
    expect(JSON.parse(served.stdout)).toMatchObject({ status: { phase: 'Ready', observedGeneration: 1 } });
    await expectExactlyOneOfEach('killed');
    expectOk(await runFerry(['delete', 'killed', '-n', kube.ns, '--cluster', cluster, '--wait']), 'ferry delete');
  });

  it('of two workers on one task queue, the one running the download is killed and the other carries on', async () => {
    const cluster = uniqueCluster('pair');
    const workers = [await startWorkerProcess(cluster), await startWorkerProcess(cluster)];
    const file = writeModel('paired', cluster, { 'sim.ferry.dev/complete-delay': '15s' });
    const waiting = runFerry(['serve', '-f', file, '--wait', '-o', 'json']);
    const workflowId = `servedmodel/${cluster}/${kube.ns}/paired`;
    const connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
    // The worker that runs awaitPuller: its identity (pid@host) is on the pending activity.
    const holder = await waitFor('the download running on one of the workers', 60_000, async () => {
      const described = await new Client({ connection }).workflow.getHandle(workflowId).describe();
      const pending = described.raw.pendingActivities?.find((a) => a.activityType?.name === 'awaitPuller');
      const pid = Number(pending?.lastWorkerIdentity?.split('@')[0]);
      return workers.find((w) => w.child.pid === pid);
    }).finally(() => connection.close());
    await holder.kill();
    // No restart: the other worker takes the retried download and everything after it.
    const ready = await waitFor('Ready on the other worker', 120_000, async () => {
      const s = await phaseOf('paired', cluster);
      return s?.phase === 'Ready' ? s : undefined;
    });
    expect(ready.timeline.filter((t) => t.step === 'download').map((t) => t.outcome)).toEqual(['Succeeded']);
    expectOk(await waiting, 'ferry serve --wait across the loss of one of two workers');
    await expectExactlyOneOfEach('paired');
    expectOk(await runFerry(['delete', 'paired', '-n', kube.ns, '--cluster', cluster, '--wait']), 'ferry delete');
  });

  it('a Temporal server restarted in the middle of a rollout loses nothing', async () => {
    // A Temporal dev server of this test's own (same scripts, own run directory and ports), so restarting it
    // does not disturb the other test files.
    const temporal = privateTemporal(17300);
    const env = { TEMPORAL_ADDRESS: temporal.address };
    try {
      temporal.up();
      const cluster = uniqueCluster('restart');
      await startWorkerProcess(cluster, temporal.address);
      // Engine pods take 15 s to become ready: the rollout is long enough to restart the server during it.
      const file = writeModel('restarted', cluster, { 'sim.ferry.dev/ready-delay': '15s' });
      const waiting = runFerry(['serve', '-f', file, '--wait', '-o', 'json'], env);
      await waitFor(
        'the rollout to be under way',
        90_000,
        async () => (await phaseOf('restarted', cluster, env))?.phase === 'Starting',
      );

      temporal.down();
      temporal.up();

      const ready = await waitFor('Ready after the restart', 240_000, async () => {
        const s = await phaseOf('restarted', cluster, env);
        return s?.phase === 'Ready' ? s : undefined;
      });
      expect(ready.generation).toBe(1);
      const served = expectOk(await waiting, 'ferry serve --wait across the Temporal restart');
      expect(JSON.parse(served.stdout)).toMatchObject({ status: { phase: 'Ready', observedGeneration: 1 } });
      await expectExactlyOneOfEach('restarted');
      expectOk(
        await runFerry(['delete', 'restarted', '-n', kube.ns, '--cluster', cluster, '--wait'], env),
        'ferry delete',
      );
    } finally {
      temporal.remove();
    }
  });
});
