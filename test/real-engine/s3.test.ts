// examples/s3.yaml on the real engine: the puller downloads the tiny Llama from the local S3 store (versitygw) with the
// keys of a Secret, continues after its pod is deleted halfway, checks every file, and a real vLLM serves it. Ferry's
// worker and CLI are the same as everywhere.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import { formatBytes, type ModelStatus, workflowIdFor } from '../../workflows/contract/index.js';
import { expectOk, ferryJson, freePort, uniqueCluster } from '../support/e2e.js';
import { spawnFerry, writeDoc } from '../support/ferry-worker.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../support/fixtures.js';
import { readLocalEnv, repoRoot } from '../support/local-env.js';
import type { Doc } from '../support/workflow-harness.js';
import { waitFor } from '../support/kube.js';
import { sample, scrapeMetrics } from '../support/metrics.js';
import { completionTokens, realEngineMissing, repoBytes, S3_STORE, s3Keys, s3Served } from './support.js';

const missing = realEngineMissing();
const kube = useNamespace('real-s3', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('real-s3');
const NAME = 'tiny-s3';

const status = () => ferryJson<ModelStatus>(['status', NAME, '-n', kube.ns, '--cluster', cluster]);

/** examples/s3.yaml in the test's namespace and cluster. */
function doc(): Doc {
  const d = parseYaml(readFileSync(join(repoRoot, 'examples/s3.yaml'), 'utf8')) as Doc;
  d.metadata.namespace = kube.ns;
  d.spec.cluster = cluster;
  d.spec.engine.startupTimeout = '10m';
  return d;
}

/** What the store's front served of the seeded model so far, over every key. */
async function seedServed(): Promise<number> {
  return Object.entries(await s3Served('models'))
    .filter(([key]) => key.startsWith('ferry-local/tiny-llama/'))
    .reduce((sum, [, n]) => sum + n, 0);
}

/** Paces (or with no query, stops pacing) every download from the seed's bucket at the store's front. */
async function shapeSeed(query?: string): Promise<void> {
  const res = await fetch(`${S3_STORE}/_ferry/shape/models${query ? `?${query}` : ''}`, {
    method: query ? 'PUT' : 'DELETE',
  });
  expect(res.status).toBe(200);
}

afterAll(async () => {
  if (!missing) await shapeSeed();
});

let metricsUrl = '';

beforeAll(async () => {
  if (missing) return;
  const port = await freePort();
  metricsUrl = `http://127.0.0.1:${port}/metrics`;
  await startWorkerProcess(cluster, undefined, undefined, { FERRY_METRICS_ADDRESS: `127.0.0.1:${port}` });
  // The Secret the example names, as the local stack makes it in namespace models.
  const keys = s3Keys();
  await kube.core.createNamespacedSecret({
    namespace: kube.ns,
    body: {
      metadata: { name: 'local-s3' },
      stringData: { AWS_ACCESS_KEY_ID: keys.accessKeyId, AWS_SECRET_ACCESS_KEY: keys.secretAccessKey },
    },
  });
}, 180_000);

describe.skipIf(missing)(`examples/s3.yaml on the real engine${missing ? ` (skipped: ${missing})` : ''}`, () => {
  it('serves the model from the S3 store, continuing across a deleted puller pod, then a real vLLM answers', async () => {
    const before = await seedServed();
    const size = repoBytes('ferry-local/tiny-llama', 'v1');
    // The store paced for this bucket, so the download takes about half a minute and its pod can be deleted halfway.
    await shapeSeed(`throttle=${Math.ceil(size / 30)}`);
    const serve = spawnFerry(['serve', '-f', writeDoc(doc()), '--wait', '--timeout', '9m']);
    const during = await waitFor('download progress in status', 120_000, async () => {
      const s = await status().catch(() => undefined);
      return s?.phase === 'Downloading' && (s.download?.bytes ?? 0) > 0 ? s.download : undefined;
    });
    expect(during.bytes).toBeLessThan(size);
    // The rate over the puller's last interval and the time left at it, in status and in the worker's metrics.
    expect(during.bytesPerSecond).toBeGreaterThan(0);
    expect(during.etaSeconds).toBeGreaterThan(0);
    const labels = { namespace: kube.ns, model: NAME };
    const metrics = await waitFor('the download in the worker metrics', 30_000, async () => {
      const samples = await scrapeMetrics(metricsUrl);
      return sample(samples, 'ferry_download_bytes', labels) ? samples : undefined;
    });
    expect(sample(metrics, 'ferry_download_total_bytes', labels)).toBe(size);
    expect(sample(metrics, 'ferry_download_bytes_per_second', labels)).toBeGreaterThanOrEqual(0);
    // And in the workflow's current details, which the Temporal Web UI shows on the model's page.
    const connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
    try {
      const handle = new Client({ connection }).workflow.getHandle(
        workflowIdFor({ cluster, namespace: kube.ns, name: NAME }),
      );
      const details = await waitFor('the rate and time left in the current details', 30_000, async () => {
        const { currentDetails } = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
        return currentDetails && / of .*\/s, .* left/.test(currentDetails) ? currentDetails : undefined;
      });
      expect(details).toContain(` of ${formatBytes(size)} (`);
      expect(details).toMatch(/download: [\d.]+ K?i?B of [\d.]+ KiB \(\d+%\), [\d.]+ K?i?B\/s, .+ left/);
    } finally {
      await connection.close();
    }
    const [pod] = (
      await kube.core.listNamespacedPod({
        namespace: kube.ns,
        labelSelector: `ferry.dev/model=${NAME},app.kubernetes.io/component=puller`,
      })
    ).items;
    // The keys reach the puller only through the Secret: the Job names it and holds neither key.
    const jobs = (await kube.batch.listNamespacedJob({ namespace: kube.ns, labelSelector: `ferry.dev/model=${NAME}` }))
      .items;
    expect(jobs).toHaveLength(1);
    const env = jobs[0]!.spec!.template.spec!.containers[0]!.env ?? [];
    expect(env.find((e) => e.name === 'AWS_SECRET_ACCESS_KEY')?.valueFrom?.secretKeyRef).toMatchObject({
      name: 'local-s3',
      key: 'AWS_SECRET_ACCESS_KEY',
    });
    for (const key of Object.values(s3Keys())) expect(JSON.stringify([jobs, pod])).not.toContain(key);
    await kube.core.deleteNamespacedPod({ name: pod!.metadata!.name!, namespace: kube.ns });
    await shapeSeed('throttle=200000');
    expectOk(await serve.exited, 'ferry serve');

    const served = await status();
    expect(served.phase).toBe('Ready');
    expect(served.source).toBe('s3://models/ferry-local/tiny-llama@http://10.245.0.1:16449');
    expect(served.download).toMatchObject({ state: 'Complete', bytes: size });
    // Counted on the store's side: what the first pod fetched is not fetched again.
    const transferred = (await seedServed()) - before;
    expect(transferred).toBeGreaterThanOrEqual(size);
    expect(transferred).toBeLessThanOrEqual(1.1 * size);
    const pods = await kube.core.listNamespacedPod({
      namespace: kube.ns,
      labelSelector: `ferry.dev/model=${NAME},app.kubernetes.io/component=puller`,
    });
    expect(pods.items.map((p) => p.metadata!.name)).not.toContain(pod!.metadata!.name);

    expect(await completionTokens(served.endpoint!, NAME)).toBeGreaterThan(0);
  });

  it('names a prefix with no objects as SourceNotFound', async () => {
    const d = doc();
    d.metadata.name = 'tiny-s3-missing';
    d.spec.source.s3.prefix = 'ferry-local/no-such-model';
    d.spec.puller = { backoffLimit: 0 };
    const result = await spawnFerry(['serve', '-f', writeDoc(d), '--wait', '--timeout', '5m']).exited;
    expect(result.code).not.toBe(0);
    const s = await ferryJson<ModelStatus>(['status', 'tiny-s3-missing', '-n', kube.ns, '--cluster', cluster]);
    expect(s.phase).toBe('Failed');
    expect(s.lastError).toMatchObject({ reason: 'SourceNotFound', step: 'download' });
    expect(s.lastError!.message).toContain('no objects under s3://models/ferry-local/no-such-model/');
  });
});
