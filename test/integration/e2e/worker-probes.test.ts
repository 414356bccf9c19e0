// The worker process's probe and metrics endpoints, as a kubelet and Prometheus see them: /healthz answers while the
// process lives; /readyz says ok only while the worker polls and Temporal and the API server answer, and names the
// one that does not; /metrics is the SDK's Prometheus exporter with this worker's task queue in its series.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort, startWorkerProcess, uniqueCluster, type WorkerProcess } from '../../support/e2e.js';
import { readLocalEnv } from '../../support/local-env.js';
import { waitFor } from '../../support/kube.js';

const get = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, text: await res.text() };
};

/** A worker with both endpoints on free loopback ports; stopped at the end of `fn`. */
async function withProbedWorker(
  extraEnv: Record<string, string>,
  fn: (worker: WorkerProcess, urls: { health: string; metrics: string }, cluster: string) => Promise<void>,
): Promise<void> {
  const [health, metrics] = [await freePort(), await freePort()];
  const cluster = uniqueCluster('probe');
  const worker = await startWorkerProcess(cluster, undefined, {
    FERRY_HEALTH_ADDRESS: `127.0.0.1:${health}`,
    FERRY_METRICS_ADDRESS: `127.0.0.1:${metrics}`,
    ...extraEnv,
  });
  try {
    await fn(worker, { health: `http://127.0.0.1:${health}`, metrics: `http://127.0.0.1:${metrics}` }, cluster);
  } finally {
    await worker.stop();
  }
}

describe('worker probes and metrics', { timeout: 120_000 }, () => {
  it('is live and ready while it polls, and exports the SDK metrics of its task queue', async () => {
    await withProbedWorker({}, async (worker, urls, cluster) => {
      expect(worker.log()).toContain(`"health":"${urls.health.slice('http://'.length)}"`);
      expect(await get(`${urls.health}/healthz`)).toEqual({ status: 200, text: 'ok\n' });
      const ready = await waitFor('ready', 30_000, async () => {
        const r = await get(`${urls.health}/readyz`);
        return r.status === 200 ? r : undefined;
      });
      expect(ready.text).toBe('ok worker\nok temporal\nok kubernetes\n');
      expect((await get(`${urls.health}/nope`)).status).toBe(404);
      const scraped = await waitFor('task queue series', 30_000, async () => {
        const r = await get(`${urls.metrics}/metrics`);
        return r.text.includes(`task_queue="ferry-${cluster}"`) ? r.text : undefined;
      });
      expect(scraped).toMatch(/^# TYPE temporal_\w+ /m);
    });
  });

  it('is live but not ready when the API server does not answer, and says which check failed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ferry-probe-'));
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{ name: gone, cluster: { server: "http://127.0.0.1:1" } }]',
        'users: [{ name: gone, user: {} }]',
        'contexts: [{ name: gone, context: { cluster: gone, user: gone } }]',
        'current-context: gone',
        '',
      ].join('\n'),
    );
    expect(readLocalEnv().KUBECONFIG).not.toBe(kubeconfig);
    await withProbedWorker({ KUBECONFIG: kubeconfig }, async (_worker, urls) => {
      expect((await get(`${urls.health}/healthz`)).status).toBe(200);
      const notReady = await get(`${urls.health}/readyz`);
      expect(notReady.status).toBe(503);
      expect(notReady.text).toMatch(
        /^ok worker\nok temporal\nfailed kubernetes: the Kubernetes API server http:\/\/127\.0\.0\.1:1 does not answer/,
      );
    });
  });
});
