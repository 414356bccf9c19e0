// Operating Ferry as a platform engineer does, on a real worker process: its log has one line per step with the
// model, its workflow and the step's duration (and no bundler dump at INFO); /metrics carries the SDK's series and
// Ferry's own with the right values; `kubectl get events` on the model's root ConfigMap tells Ready, Degraded (and
// Ready again, counted on the same Event), the update and the teardown; and the objects name their workflow.
import type { CoreV1Event } from '@kubernetes/client-node';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rootName } from '../../../activities/builders/index.js';
import { updateModelSignal, workflowIdFor, type ModelStatus } from '../../../workflows/contract/index.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import type { Doc } from '../../support/workflow-harness.js';
import {
  expectOk,
  ferryJson,
  freePort,
  startWorkerProcess,
  terminateModelsOf,
  uniqueCluster,
  type WorkerProcess,
} from '../../support/e2e.js';
import { RESTRICTED, useNamespace } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';
import { readLocalEnv } from '../../support/local-env.js';
import { sample, scrapeMetrics } from '../../support/metrics.js';

const kube = useNamespace('ops', RESTRICTED);
const cluster = uniqueCluster('ops');
const WEB_UI = 'http://ui.example.test:8233';
let worker: WorkerProcess;
let metricsUrl: string;

beforeAll(async () => {
  const port = await freePort();
  metricsUrl = `http://127.0.0.1:${port}/metrics`;
  worker = await startWorkerProcess(cluster, undefined, {
    FERRY_METRICS_ADDRESS: `127.0.0.1:${port}`,
    TEMPORAL_UI_URL: WEB_UI,
  });
}, 180_000);

afterAll(async () => {
  await terminateModelsOf(cluster).catch(() => undefined);
  await worker?.stop();
});

function modelDoc(name: string, replicas = 1): Doc {
  return {
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: {
      name,
      namespace: kube.ns,
      labels: { 'sim.ferry.dev/load-delay-seconds': '1', 'sim.ferry.dev/complete-delay': '2s' },
    },
    spec: {
      cluster,
      replicas,
      source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
      engine: { startupTimeout: '3m' },
      puller: { deadline: '5m' },
    },
  };
}

const ref = (name: string) => [name, '-n', kube.ns, '--cluster', cluster];
const status = (name: string) => ferryJson<ModelStatus>(['status', ...ref(name)]);

const scrape = () => scrapeMetrics(metricsUrl);

/** The worker's JSON log lines about one model. */
function modelLines(name: string): Record<string, unknown>[] {
  return worker
    .log()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.model === name && line.namespace === kube.ns);
}

async function rootEvents(name: string): Promise<CoreV1Event[]> {
  const list = await kube.core.listNamespacedEvent({
    namespace: kube.ns,
    fieldSelector: `involvedObject.kind=ConfigMap,involvedObject.name=${rootName(name)}`,
  });
  return list.items;
}

describe('operating Ferry: logs, metrics, Kubernetes Events, annotations', { timeout: 300_000 }, () => {
  it('reports a model through its whole life', async () => {
    const name = 'watched';
    const workflowId = workflowIdFor({ cluster, namespace: kube.ns, name });
    expectOk(await runFerry(['serve', '-f', writeDoc(modelDoc(name)), '--wait', '--timeout', '4m']), 'ferry serve');
    const served = await status(name);

    // Logs: one line per step start and end, with the fields a person filters on.
    const steps = ['claim', 'storage', 'download', 'release', 'rollout', 'startup'];
    const lines = modelLines(name);
    for (const step of steps) {
      expect(lines.filter((l) => l.msg === `${step} started`)).toHaveLength(1);
      const ended = lines.filter((l) => l.msg === `${step} succeeded`);
      expect(ended).toHaveLength(1);
      expect(ended[0]).toMatchObject({ level: 'info', cluster, workflowId, step, generation: 1 });
      expect(ended[0]!.durationMs).toEqual(expect.any(Number));
    }
    expect(lines.find((l) => l.msg === 'phase Ready')).toMatchObject({ level: 'info', from: 'Starting' });
    const bundler = worker
      .log()
      .split('\n')
      .filter((l) => l.includes('workflow-bundle') || l.includes('Workflow bundle created'));
    expect(bundler).toEqual([]);

    // Metrics: Ferry's series next to the SDK's, on the one endpoint.
    const samples = await waitFor('ferry_models counting the Ready model', 40_000, async () => {
      const s = await scrape();
      return sample(s, 'ferry_models', { phase: 'Ready' }) === 1 ? s : undefined;
    });
    expect(samples.some((s) => s.name.startsWith('temporal_') && s.labels.task_queue === `ferry-${cluster}`)).toBe(
      true,
    );
    expect(sample(samples, 'ferry_models', { phase: 'Downloading' })).toBe(0);
    for (const step of steps) {
      expect(sample(samples, 'ferry_step_duration_seconds_count', { step, outcome: 'Succeeded' })).toBe(1);
    }
    const download = served.timeline.find((e) => e.step === 'download')!;
    expect(sample(samples, 'ferry_step_duration_seconds_sum', { step: 'download', outcome: 'Succeeded' })).toBeCloseTo(
      download.durationMs! / 1000,
      2,
    );
    expect(sample(samples, 'ferry_time_to_ready_seconds_count')).toBe(1);
    expect(sample(samples, 'ferry_weights_pulled_bytes_total')).toBe(served.download?.bytes ?? 0);
    expect(sample(samples, 'ferry_model_ready_replicas', { namespace: kube.ns, model: name })).toBe(1);
    expect(sample(samples, 'ferry_phase_changes_total', { phase: 'Ready' })).toBe(1);
    // The watch of each kind in the model's namespace: open, and heard from (its list at least).
    for (const kind of ['ConfigMap', 'Pod', 'Deployment']) {
      expect(sample(samples, 'ferry_watch_age_seconds', { namespace: kube.ns, kind }), kind).toBeGreaterThan(0);
      expect(
        sample(samples, 'ferry_watch_last_event_seconds', { namespace: kube.ns, kind }),
        kind,
      ).toBeGreaterThanOrEqual(0);
    }
    expect(samples.filter((s) => s.name === 'ferry_watch_restarts_total' && s.labels.how !== 'renewed')).toEqual([]);

    // The objects name their workflow; the root links its Web UI page.
    const root = await kube.core.readNamespacedConfigMap({ name: rootName(name), namespace: kube.ns });
    expect(root.metadata?.annotations?.['ferry.dev/workflow-id']).toBe(workflowId);
    expect(root.metadata?.annotations?.['ferry.dev/web-ui']).toBe(
      `${WEB_UI}/namespaces/default/workflows/${encodeURIComponent(workflowId)}`,
    );
    const deployment = await kube.apps.readNamespacedDeployment({ name, namespace: kube.ns });
    expect(deployment.metadata?.annotations?.['ferry.dev/workflow-id']).toBe(workflowId);

    // Events: Ready on the root object, as kubectl describe finds it (by the root's uid).
    const ready = await waitFor('a Ready Event', 10_000, async () =>
      (await rootEvents(name)).find((e) => e.reason === 'Ready'),
    );
    expect(ready).toMatchObject({
      type: 'Normal',
      count: 1,
      source: { component: 'ferry' },
      involvedObject: { uid: root.metadata!.uid },
    });
    expect(ready.message).toContain('generation 1');

    // Degraded and back: a Warning with the reason, then Ready again (locally each stand-in has its own endpoint, so
    // the message differs; the same message would count the same Event: test/integration/activities/events.test.ts).
    const [pod] = (await kube.core.listNamespacedPod({ namespace: kube.ns, labelSelector: `ferry.dev/model=${name}` }))
      .items;
    await kube.core.deleteNamespacedPod({ name: pod!.metadata!.name!, namespace: kube.ns });
    const again = await waitFor('Degraded, then Ready again', 60_000, async () => {
      const events = await rootEvents(name);
      const readies = events.filter((e) => e.reason === 'Ready').reduce((n, e) => n + (e.count ?? 1), 0);
      return readies >= 2 && events.some((e) => e.reason === 'Degraded') ? events : undefined;
    });
    const degraded = again.find((e) => e.reason === 'Degraded')!;
    expect(degraded.type).toBe('Warning');
    expect(degraded.message).toMatch(/^(ReplicasUnavailable|Unhealthy): /);
    expect(modelLines(name).find((l) => l.msg === 'phase Degraded')).toMatchObject({ level: 'warn' });

    // An update signal the workflow refuses: a Warning Event, a warning line and a count; the model stays Ready.
    const connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
    try {
      const invalid = { ...modelDoc(name), spec: { ...modelDoc(name).spec, replicas: -1 } };
      await new Client({ connection }).workflow.getHandle(workflowId).signal(updateModelSignal, { spec: invalid });
    } finally {
      await connection.close();
    }
    const refusal = await waitFor('a ChangeRefused Event', 20_000, async () =>
      (await rootEvents(name)).find((e) => e.reason === 'ChangeRefused'),
    );
    expect(refusal.type).toBe('Warning');
    expect(refusal.message).toMatch(/^update by signal refused, generation 1 stays: InvalidSpec: spec\.replicas: /);
    expect(modelLines(name).find((l) => l.msg === 'update signal refused')).toMatchObject({
      level: 'warn',
      reason: 'InvalidSpec',
      generation: 1,
    });
    await waitFor('the refusal counted', 20_000, async () =>
      sample(await scrape(), 'ferry_refused_changes_total', { change: 'update', reason: 'InvalidSpec' }) === 1
        ? true
        : undefined,
    );
    expect(await status(name)).toMatchObject({ phase: 'Ready', generation: 1, lastError: { refused: 'update' } });

    // An update, then the teardown.
    expectOk(
      await runFerry(['update', '-f', writeDoc(modelDoc(name, 0)), '--wait', '--timeout', '2m']),
      'ferry update',
    );
    expectOk(await runFerry(['delete', ...ref(name), '--wait']), 'ferry delete');
    const last = await waitFor('the Deleted Event', 20_000, async () => {
      const events = await rootEvents(name);
      return events.some((e) => e.reason === 'Deleted') ? events : undefined;
    });
    // Who asked, as the CLI said: its Temporal identity (pid@host).
    expect(last.find((e) => e.reason === 'UpdateAccepted')?.message).toMatch(
      /^generation 2 accepted, asked by \d+@\S+$/,
    );
    expect(last.find((e) => e.reason === 'Deleting')?.message).toMatch(/^deleting: asked by \d+@\S+$/);
    expect(last.find((e) => e.reason === 'Deleting')?.type).toBe('Normal');
    expect(last.find((e) => e.reason === 'Deleted')?.message).toMatch(/^deleted \d+ object\(s\)/);
    // At least once: a workflow task that outlives its timeout on an overloaded machine runs (and reports) again.
    expect(modelLines(name).filter((l) => l.msg === 'teardown succeeded').length).toBeGreaterThanOrEqual(1);
  });

  it('counts a failure by its type and step, and logs it with the reason', async () => {
    const name = 'taken';
    // Someone else's ConfigMap holds the root object's name: the claim fails with NameConflict, not retried.
    await kube.core.createNamespacedConfigMap({
      namespace: kube.ns,
      body: { metadata: { name: rootName(name), namespace: kube.ns }, data: { owner: 'someone else' } },
    });
    const run = await runFerry(['serve', '-f', writeDoc(modelDoc(name)), '--wait', '--timeout', '2m']);
    expect(run.code).not.toBe(0);
    const samples = await waitFor('the failure counted', 20_000, async () => {
      const s = await scrape();
      return sample(s, 'ferry_step_failures_total', { step: 'claim', reason: 'NameConflict', retrying: 'false' }) === 1
        ? s
        : undefined;
    });
    expect(sample(samples, 'ferry_activity_failures_total', { activity: 'claimName', type: 'NameConflict' })).toBe(1);
    expect(modelLines(name).find((l) => l.msg === 'claim failed')).toMatchObject({
      level: 'error',
      step: 'claim',
      reason: 'NameConflict',
      generation: 1,
    });
    expect(modelLines(name).find((l) => l.msg === 'phase Failed')).toMatchObject({ reason: 'NameConflict' });
    // The name is someone else's: no Event is posted on their object.
    expect(await rootEvents(name)).toEqual([]);
  });
});
