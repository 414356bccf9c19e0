import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelStatus } from '../../../workflows/contract';
import { runFerry, writeDoc } from '../../support/ferry-worker';
import {
  expectOk,
  ferryJson,
  modelObjects,
  startWorkerProcess,
  terminateModelsOf,
  uniqueCluster,
  type WorkerProcess,
} from '../../support/e2e';
import { adminKubeConfig, clientsFor, createNamespace, deleteNamespace, waitFor, type Clients } from '../../support/kube';
import { repoRoot } from '../../support/local-env';

// Durable execution is the point: the worker dying mid-download, or the Temporal server restarting mid-rollout,
// must end in the same Ready model with no duplicate objects.
let c: Clients;
let ns: string;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  c = clientsFor(adminKubeConfig());
  ns = await createNamespace(c, 'e2e-crash', { 'pod-security.kubernetes.io/enforce': 'restricted' });
});
afterAll(async () => {
  for (const w of workers) await terminateModelsOf(w.cluster).catch(() => undefined);
  for (const w of workers) await w.stop();
  await deleteNamespace(c, ns);
});

function writeModel(name: string, cluster: string, labels: Record<string, string>): string {
  return writeDoc({
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: { name, namespace: ns, labels: { 'sim.ferry.dev/load-delay-seconds': '1', ...labels } },
    spec: {
      cluster,
      source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct' } },
      engine: { startupTimeout: '5m' },
      puller: { deadline: '10m' },
    },
  });
}

async function phaseOf(name: string, cluster: string, env?: Record<string, string>): Promise<ModelStatus | undefined> {
  return ferryJson<ModelStatus>(['status', name, '-n', ns, '--cluster', cluster], env).catch(() => undefined);
}

/** One of each object a Ready model owns, and no puller Job or pod left over. */
async function expectExactlyOneOfEach(name: string): Promise<void> {
  const objects = (await modelObjects(c, ns, name)).filter((o) => !o.startsWith('Pod/'));
  expect(objects).toEqual([
    `ConfigMap/${name}-ferry`,
    `Deployment/${name}`,
    `PersistentVolumeClaim/${name}-weights`,
    `Service/${name}`,
  ]);
  const pods = await c.core.listNamespacedPod({ namespace: ns, labelSelector: `ferry.dev/model=${name}` });
  expect(pods.items.map((p) => p.metadata?.labels?.['app.kubernetes.io/component'])).toEqual(['engine']);
}

describe('crash recovery', { timeout: 420_000 }, () => {
  it('a worker killed with SIGKILL in the middle of a download is replaced and the model still becomes Ready', async () => {
    const cluster = uniqueCluster('kill');
    const first = await startWorkerProcess(cluster);
    workers.push(first);
    // The simulated download takes 20 s: long enough to kill the worker in the middle of it.
    const file = writeModel('killed', cluster, { 'sim.ferry.dev/complete-delay': '20s' });
    expectOk(await runFerry(['serve', '-f', file]), 'ferry serve');

    await waitFor('the download to be under way', 60_000, async () => (await phaseOf('killed', cluster))?.phase === 'Downloading');
    await first.kill();

    const second = await startWorkerProcess(cluster);
    workers.push(second);
    // The killed worker's awaitPuller times out on its heartbeat and is retried on the new worker.
    const ready = await waitFor('Ready after the restart', 240_000, async () => {
      const s = await phaseOf('killed', cluster);
      return s?.phase === 'Ready' ? s : undefined;
    });
    expect(ready.timeline.filter((t) => t.step === 'download').map((t) => t.outcome)).toEqual(['Succeeded']);
    await expectExactlyOneOfEach('killed');
    expectOk(await runFerry(['delete', 'killed', '-n', ns, '--cluster', cluster, '--wait']), 'ferry delete');
  });

  it('a Temporal server restarted in the middle of a rollout loses nothing', async () => {
    // A Temporal dev server of this test's own (same scripts, own run directory and ports), so restarting it
    // does not disturb the other test files.
    const runDir = mkdtempSync(join(tmpdir(), 'ferry-temporal-e2e-'));
    const port = 17300;
    const scriptEnv = {
      ...process.env,
      FERRY_RUN_DIR: runDir,
      FERRY_TEMPORAL_PORT: String(port),
      FERRY_TEMPORAL_UI_PORT: String(port + 1),
      FERRY_TEMPORAL_HTTP_PORT: String(port + 2),
      FERRY_TEMPORAL_METRICS_PORT: String(port + 3),
    };
    const script = (name: string, ...args: string[]) =>
      execFileSync('bash', [join(repoRoot, 'deploy/local', name), ...args], { env: scriptEnv, stdio: 'pipe' });
    const address = `127.0.0.1:${port}`;
    const env = { TEMPORAL_ADDRESS: address };
    try {
      script('up.sh', 'temporal');
      const cluster = uniqueCluster('restart');
      const worker = await startWorkerProcess(cluster, address);
      workers.push(worker);
      // Engine pods take 15 s to become ready: the rollout is long enough to restart the server during it.
      const file = writeModel('restarted', cluster, { 'sim.ferry.dev/ready-delay': '15s' });
      expectOk(await runFerry(['serve', '-f', file], env), 'ferry serve');
      await waitFor('the rollout to be under way', 90_000, async () => (await phaseOf('restarted', cluster, env))?.phase === 'Starting');

      script('down.sh', 'temporal');
      script('up.sh', 'temporal');

      const ready = await waitFor('Ready after the restart', 240_000, async () => {
        const s = await phaseOf('restarted', cluster, env);
        return s?.phase === 'Ready' ? s : undefined;
      });
      expect(ready.generation).toBe(1);
      await expectExactlyOneOfEach('restarted');
      expectOk(await runFerry(['delete', 'restarted', '-n', ns, '--cluster', cluster, '--wait'], env), 'ferry delete');
    } finally {
      script('down.sh', 'temporal');
      rmSync(runDir, { recursive: true, force: true });
    }
  });
});
