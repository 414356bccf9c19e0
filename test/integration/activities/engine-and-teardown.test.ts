import { CancelledFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { Cluster } from '../../../activities/cluster/api.js';
import { SCALE_FIELD_MANAGER } from '../../../activities/steps/engine.js';
import { createActivities } from '../../../activities/create-activities.js';
import { FAILURE, type ServedModel } from '../../../workflows/contract/index.js';
import {
  buildDeployment,
  buildAdapterJob,
  buildInferencePool,
  INFERENCE_POOL_API_VERSION,
  INFERENCE_POOL_KIND,
  type InferencePool,
  buildPullerJob,
  buildPvc,
  FIELD_MANAGER,
  LABEL_MANAGED_BY,
  LABEL_MODEL,
  pvcName,
  rootName,
} from '../../../activities/builders/index.js';
import { activity, rejectionOf, runActivity, testDeps, testModel } from '../../support/activity-env.js';
import { enginePodsOf, prepareModel } from '../../support/engine-env.js';
import { RESTRICTED, useActivityEnv } from '../../support/fixtures.js';
import { adminKubeConfig, serviceAccountWithRole, statusOf, waitFor } from '../../support/kube.js';

// The engine's objects against the real API server, controllers and scheduler, in a namespace that enforces Pod
// Security "restricted": engine pods that were not admitted would never become ready.
const env = useActivityEnv('act-engine', { labels: RESTRICTED, timing: { pollMs: 250 } });

const readDeployment = (name: string) => env.apps.readNamespacedDeployment({ name, namespace: env.ns });
const gone = async (read: () => Promise<unknown>) => {
  try {
    await read();
    return false;
  } catch (err) {
    return statusOf(err) === 404;
  }
};

/** A model with its root and volume in place, as claimName and applyStorage leave them. */
async function prepared(name: string, options: Parameters<typeof testModel>[2] = {}) {
  const model = testModel(name, env.ns, options);
  const rootUid = await prepareModel(model, env.cluster);
  return { model, rootUid, sourceHash: 'unused' };
}

describe('applyEngine and awaitRollout', () => {
  it('rolls out engine pods admitted under "restricted"; applying the same spec again changes nothing', async () => {
    const input = await prepared('steady', { spec: { resources: { gpus: 1 } } });
    const first = await activity(env.acts.applyEngine, input);
    const rollout = await activity(env.acts.awaitRollout, { model: input.model, generation: first.generation });
    expect(rollout).toEqual({ generation: first.generation, readyReplicas: 1, updatedReplicas: 1 });

    // Once the controllers are done writing status, a second apply of the same spec writes nothing.
    const before = await settled(() => readDeployment('steady'));
    const service = await env.core.readNamespacedService({ name: 'steady', namespace: env.ns });
    const again = await activity(env.acts.applyEngine, input);
    expect(again.generation).toBe(first.generation);
    expect((await readDeployment('steady')).metadata?.resourceVersion).toBe(before.metadata?.resourceVersion);
    const serviceAgain = await env.core.readNamespacedService({ name: 'steady', namespace: env.ns });
    expect(serviceAgain.metadata?.resourceVersion).toBe(service.metadata?.resourceVersion);

    const pods = await enginePodsOf(env, input.model);
    expect(pods).toHaveLength(1);
    expect(pods[0]!.spec?.securityContext?.runAsUser).toBe(2000);
    expect(pods[0]!.spec?.nodeName).toMatch(/^gpu-node-/);
  });

  it('a spec change is rolled out only once the new ReplicaSet has ready pods', async () => {
    const input = await prepared('change');
    const v1 = await activity(env.acts.applyEngine, input);
    await activity(env.acts.awaitRollout, { model: input.model, generation: v1.generation });
    const [oldPod] = await enginePodsOf(env, input.model);
    const oldHash = oldPod!.metadata!.labels!['pod-template-hash'];

    const changed = withSpec(input.model, (m) =>
      m.spec.engine.env.push({ name: 'VLLM_LOGGING_LEVEL', value: 'DEBUG' }),
    );
    const v2 = await activity(env.acts.applyEngine, { ...input, model: changed });
    expect(v2.generation).toBe(v1.generation + 1);
    const run = runActivity(env.acts.awaitRollout, { model: changed, generation: v2.generation });
    const rollout = await run.result;
    expect(rollout.generation).toBe(v2.generation);
    // Right after the apply the old revision's replica was still ready: the rollout waited for the new one.
    expect(run.heartbeats.length).toBeGreaterThan(0);
    const pods = (await enginePodsOf(env, changed)).filter((p) => !p.metadata?.deletionTimestamp);
    expect(pods).toHaveLength(1);
    expect(pods[0]!.metadata!.labels!['pod-template-hash']).not.toBe(oldHash);
    expect(pods[0]!.status?.conditions?.find((x) => x.type === 'Ready')?.status).toBe('True');

    // A revision whose pods never become ready is never rolled out: the wait reports where it stands until cancelled.
    const broken = testModel('change', env.ns, { labels: { 'sim.ferry.dev/engine-scenario': 'never-ready' } });
    const v3 = await activity(env.acts.applyEngine, { ...input, model: broken });
    const waiting = runActivity(env.acts.awaitRollout, { model: broken, generation: v3.generation });
    await waitFor('a heartbeat about the not-ready revision', 20_000, async () =>
      waiting.heartbeats.some((h) => h.step === 'rollout' && ['Starting', 'Running'].includes(h.state)),
    );
    await new Promise((r) => setTimeout(r, 1_000));
    waiting.env.cancel();
    expect(await rejectionOf(waiting.result)).toBeInstanceOf(CancelledFailure);
  });

  it('replicas 0 is rolled out once no engine pod is left; the next apply takes the replica count back', async () => {
    const input = await prepared('zero');
    const v1 = await activity(env.acts.applyEngine, input);
    await activity(env.acts.awaitRollout, { model: input.model, generation: v1.generation });

    const v2 = await activity(env.acts.applyEngine, { ...input, replicas: 0 });
    await activity(env.acts.awaitRollout, { model: input.model, generation: v2.generation });
    expect(await enginePodsOf(env, input.model)).toHaveLength(0);

    const v3 = await activity(env.acts.applyEngine, input);
    const rollout = await activity(env.acts.awaitRollout, { model: input.model, generation: v3.generation });
    expect(rollout.readyReplicas).toBe(1);
  });
});

describe('spec.inferencePool', () => {
  const readPool = (name: string) =>
    env.cluster.get<InferencePool>({
      apiVersion: INFERENCE_POOL_API_VERSION,
      kind: INFERENCE_POOL_KIND,
      name,
      namespace: env.ns,
    });
  const withPool = { inferencePool: { endpointPicker: { name: 'pool-epp' } } };

  it('applies the pool over the engine pods; an update without it deletes it; teardown deletes it', async () => {
    const input = await prepared('pool', { spec: withPool });
    const { generation } = await activity(env.acts.applyEngine, input);
    await activity(env.acts.awaitRollout, { model: input.model, generation });
    const pool = await readPool('pool');
    expect(pool?.spec.selector.matchLabels).toEqual(
      (await env.core.readNamespacedService({ name: 'pool', namespace: env.ns })).spec?.selector,
    );
    expect(pool?.spec.targetPorts).toEqual([{ number: input.model.spec.engine.port }]);
    expect(pool?.spec.endpointPickerRef).toMatchObject({ name: 'pool-epp', port: { number: 9002 } });
    // The pool selects exactly the model's engine pods.
    const selected = await env.core.listNamespacedPod({
      namespace: env.ns,
      labelSelector: Object.entries(pool!.spec.selector.matchLabels)
        .map(([k, v]) => `${k}=${v}`)
        .join(','),
    });
    expect(selected.items.map((p) => p.metadata?.name).sort()).toEqual(
      (await enginePodsOf(env, input.model)).map((p) => p.metadata?.name).sort(),
    );

    await activity(env.acts.applyEngine, { ...input, model: testModel('pool', env.ns) });
    await waitFor('the pool the spec dropped to be gone', 10_000, async () => (await readPool('pool')) === undefined);

    await activity(env.acts.applyEngine, input);
    expect(await readPool('pool')).toBeDefined();
    const result = await activity(env.acts.tearDown, { model: input.model });
    expect(result.deleted).toContain('InferencePool/pool');
    await waitFor('the pool to be gone', 10_000, async () => (await readPool('pool')) === undefined);
  });

  it('never takes over a pool of the same name without our labels', async () => {
    const input = await prepared('pool-foreign', { spec: withPool });
    const foreign = buildInferencePool(input.model, { rootUid: input.rootUid })!;
    foreign.metadata.labels = { team: 'search' };
    delete foreign.metadata.ownerReferences;
    await env.cluster.apply(foreign, 'someone-else');
    const failed = await rejectionOf(activity(env.acts.applyEngine, input));
    expect(failed).toMatchObject({ type: FAILURE.NameConflict });
    expect((await readPool('pool-foreign'))?.metadata?.labels).toEqual({ team: 'search' });
  });

  it('on a cluster without the CRD: InferenceExtensionMissing, before anything is applied', async () => {
    class WithoutExtension extends Cluster {
      override async serves(): Promise<boolean> {
        return false;
      }
    }
    const acts = createActivities({ ...testDeps({ pollMs: 250 }), cluster: new WithoutExtension(adminKubeConfig()) });
    // The claim refuses it before the name is claimed: no root ConfigMap, nothing of the model.
    const unclaimed = testModel('pool-unclaimed', env.ns, { spec: withPool });
    const refused = await rejectionOf(activity(acts.claimName, { model: unclaimed }));
    expect(refused).toMatchObject({ type: FAILURE.InferenceExtensionMissing });
    expect(
      await gone(() => env.core.readNamespacedConfigMap({ name: rootName('pool-unclaimed'), namespace: env.ns })),
    ).toBe(true);
    // applyEngine (an update that adds the pool to a served model) refuses it before it writes anything.
    const input = await prepared('pool-nocrd', { spec: withPool });
    const failed = await rejectionOf(activity(acts.applyEngine, input));
    expect(failed).toMatchObject({ type: FAILURE.InferenceExtensionMissing });
    expect(failed.message).toMatch(/install the Gateway API Inference Extension's CRDs/);
    expect(await gone(() => readDeployment('pool-nocrd'))).toBe(true);
    expect(await gone(() => env.core.readNamespacedService({ name: 'pool-nocrd', namespace: env.ns }))).toBe(true);
    // Without spec.inferencePool the same cluster serves the model as before.
    const plain = { ...input, model: testModel('pool-nocrd', env.ns) };
    const { generation } = await activity(acts.applyEngine, plain);
    expect(generation).toBeGreaterThan(0);
  });
});

describe('scaleEngine', () => {
  it('scales to 0 and returns only when no engine pod remains; applyEngine restores the spec', async () => {
    const input = await prepared('scaled');
    const v1 = await activity(env.acts.applyEngine, input);
    await activity(env.acts.awaitRollout, { model: input.model, generation: v1.generation });
    expect(await enginePodsOf(env, input.model)).toHaveLength(1);

    await activity(env.acts.scaleEngine, { model: input.model, replicas: 0 });
    expect(await enginePodsOf(env, input.model)).toHaveLength(0);
    const scaled = await readDeployment('scaled');
    expect(scaled.spec?.replicas).toBe(0);
    expect(scaled.metadata?.managedFields?.some((f) => f.manager === SCALE_FIELD_MANAGER)).toBe(true);
    // Scaling to 0 again, or a model whose Deployment is gone, is a no-op.
    await activity(env.acts.scaleEngine, { model: input.model, replicas: 0 });
    await activity(env.acts.scaleEngine, { model: testModel('never-applied', env.ns), replicas: 0 });

    const v2 = await activity(env.acts.applyEngine, input);
    await activity(env.acts.awaitRollout, { model: input.model, generation: v2.generation });
    const restored = await readDeployment('scaled');
    expect(restored.spec?.replicas).toBe(1);
    expect(restored.metadata?.managedFields?.some((f) => f.manager === SCALE_FIELD_MANAGER)).toBe(false);
  });

  it('never touches a Deployment of the same name without our labels', async () => {
    const model = testModel('foreign-deploy', env.ns);
    const foreign = buildDeployment(model, { rootUid: 'x' });
    foreign.metadata = { name: 'foreign-deploy', namespace: env.ns, labels: { app: 'someone-else' } };
    await env.cluster.apply(foreign, 'someone-else');
    const err = await rejectionOf(activity(env.acts.scaleEngine, { model, replicas: 0 }));
    expect(err).toMatchObject({ type: FAILURE.NameConflict });
    const applyErr = await rejectionOf(activity(env.acts.applyEngine, { model, rootUid: 'x', sourceHash: 'x' }));
    expect(applyErr).toMatchObject({ type: FAILURE.NameConflict });
    expect((await readDeployment('foreign-deploy')).spec?.replicas).toBe(1);
  });
});

describe('garbage collection backstop', () => {
  it('deleting the root ConfigMap removes the Deployment and the Service', async () => {
    const input = await prepared('orphaned');
    await activity(env.acts.applyEngine, input);
    await env.core.deleteNamespacedConfigMap({ name: rootName('orphaned'), namespace: env.ns });
    await waitFor(
      'the garbage collector to delete the Deployment and Service',
      30_000,
      async () =>
        (await gone(() => readDeployment('orphaned'))) &&
        (await gone(() => env.core.readNamespacedService({ name: 'orphaned', namespace: env.ns }))),
    );
  });
});

describe('tearDown', () => {
  it('deletes every object of the model, puller and adapter Jobs included; a second teardown finds nothing left', async () => {
    // No GPU: what is deleted does not depend on it, and the tests beside this one may hold every shared GPU for
    // minutes (an engine pod left Pending made this test wait out its timeout).
    const input = await prepared('bye', {
      spec: {
        resources: { gpus: 0 },
        engine: { lora: { enabled: true, adapters: [{ name: 'sql', source: { huggingface: { repo: 'o/sql' } } }] } },
      },
    });
    await env.cluster.apply(buildPullerJob(input.model, { rootUid: input.rootUid }), FIELD_MANAGER);
    await env.cluster.apply(buildAdapterJob(input.model, { rootUid: input.rootUid }), FIELD_MANAGER);
    const { generation } = await activity(env.acts.applyEngine, input);
    await activity(env.acts.awaitRollout, { model: input.model, generation });
    // A Service of another model's name nearby is not ours to delete.
    await env.core.createNamespacedService({
      namespace: env.ns,
      body: { metadata: { name: 'bye-other' }, spec: { ports: [{ port: 80 }] } },
    });

    const result = await activity(env.acts.tearDown, { model: input.model });
    expect(result.retained).toEqual([]);
    expect(result.deleted).toEqual(
      expect.arrayContaining([
        `ConfigMap/${rootName('bye')}`,
        'Deployment/bye',
        'Service/bye',
        `PersistentVolumeClaim/${pvcName('bye')}`,
        expect.stringMatching(/^Job\/bye-pull-/),
        expect.stringMatching(/^Job\/bye-adapters-/),
      ]),
    );
    await waitFor('the engine, Service, Jobs and root to be gone', 30_000, async () => {
      const jobs = await env.batch.listNamespacedJob({ namespace: env.ns, labelSelector: `${LABEL_MODEL}=bye` });
      return (
        jobs.items.length === 0 &&
        (await gone(() => readDeployment('bye'))) &&
        (await gone(() => env.core.readNamespacedService({ name: 'bye', namespace: env.ns }))) &&
        (await gone(() => env.core.readNamespacedConfigMap({ name: rootName('bye'), namespace: env.ns })))
      );
    });
    await waitFor('no pod of the model left', 30_000, async () => {
      const pods = await env.core.listNamespacedPod({ namespace: env.ns, labelSelector: `${LABEL_MODEL}=bye` });
      return pods.items.length === 0;
    });

    const second = await activity(env.acts.tearDown, { model: input.model });
    expect(second.deleted).toEqual(
      expect.arrayContaining([`ConfigMap/${rootName('bye')}`, 'Deployment/bye', 'Service/bye']),
    );
    expect(second.deleted.some((d) => d.startsWith('Job/'))).toBe(false);
    await env.core.readNamespacedService({ name: 'bye-other', namespace: env.ns });
  });

  it('leaves an object of the same name without our labels alone', async () => {
    const model = testModel('squatter', env.ns);
    await env.core.createNamespacedService({
      namespace: env.ns,
      body: { metadata: { name: 'squatter', labels: { app: 'theirs' } }, spec: { ports: [{ port: 80 }] } },
    });
    const result = await activity(env.acts.tearDown, { model });
    expect(result.deleted).not.toContain('Service/squatter');
    expect((await env.core.readNamespacedService({ name: 'squatter', namespace: env.ns })).metadata?.labels).toEqual({
      app: 'theirs',
    });
  });

  it('keeps a retained volume, labelled and without the owner reference that would let the GC take it', async () => {
    const model = testModel('keep', env.ns, { spec: { storage: { retainOnDelete: true } } });
    const rootUid = await prepareModel(model, env.cluster);
    // Created while retention was off: the volume still names the root as owner.
    const owned = testModel('keep', env.ns);
    await env.cluster.apply(buildPvc(owned, { rootUid }), FIELD_MANAGER);
    const pvcBefore = await env.core.readNamespacedPersistentVolumeClaim({ name: pvcName('keep'), namespace: env.ns });
    expect(pvcBefore.metadata?.ownerReferences?.[0]?.uid).toBe(rootUid);
    await activity(env.acts.applyEngine, { model, rootUid, sourceHash: 'x' });

    const result = await activity(env.acts.tearDown, { model });
    expect(result.retained).toEqual([`PersistentVolumeClaim/${pvcName('keep')}`]);
    expect(result.deleted).not.toContain(`PersistentVolumeClaim/${pvcName('keep')}`);
    await waitFor('the root to be gone', 30_000, () =>
      gone(() => env.core.readNamespacedConfigMap({ name: rootName('keep'), namespace: env.ns })),
    );
    // Give the garbage collector time to act on anything that still named the root.
    await waitFor('the Deployment to be collected', 30_000, () => gone(() => readDeployment('keep')));
    const pvc = await env.core.readNamespacedPersistentVolumeClaim({ name: pvcName('keep'), namespace: env.ns });
    expect(pvc.metadata?.deletionTimestamp).toBeUndefined();
    expect(pvc.metadata?.ownerReferences ?? []).toEqual([]);
    expect(pvc.metadata?.labels).toMatchObject({ [LABEL_MANAGED_BY]: 'ferry', [LABEL_MODEL]: 'keep' });

    // Teardown again: still retained, nothing fails.
    const again = await activity(env.acts.tearDown, { model });
    expect(again.retained).toEqual([`PersistentVolumeClaim/${pvcName('keep')}`]);
  });

  it('aggregates what it could not delete: a Role without delete on Services', async () => {
    const input = await prepared('partial');
    await activity(env.acts.applyEngine, input);
    const kc = await serviceAccountWithRole(env, env.ns, 'worker', 'teardown-but-services', [
      {
        apiGroups: [''],
        resources: ['configmaps', 'persistentvolumeclaims', 'pods'],
        verbs: ['get', 'list', 'delete', 'patch'],
      },
      { apiGroups: [''], resources: ['services'], verbs: ['get', 'list'] },
      { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'list', 'delete'] },
      { apiGroups: ['batch'], resources: ['jobs'], verbs: ['get', 'list', 'delete'] },
    ]);
    const worker = new Cluster(kc);
    const asWorker = createActivities({ ...testDeps(), cluster: worker });

    const err = await rejectionOf(activity(asWorker.tearDown, { model: input.model }));
    expect(err).toMatchObject({ type: FAILURE.TeardownIncomplete, nonRetryable: false });
    expect(err.message).toMatch(/Service\/partial: HTTP 403 Forbidden: deleting Service .*partial.*forbidden/);
    const [details] = (err as unknown as { details: [{ deleted: string[]; failures: { object: string }[] }] }).details;
    expect(details.failures.map((f) => f.object)).toEqual(['Service/partial']);
    expect(details.deleted).toEqual(
      expect.arrayContaining([
        `ConfigMap/${rootName('partial')}`,
        'Deployment/partial',
        `PersistentVolumeClaim/${pvcName('partial')}`,
      ]),
    );
    const root = () => env.core.readNamespacedConfigMap({ name: rootName('partial'), namespace: env.ns });
    expect(await gone(root)).toBe(true);
    // The Service is still there: no false "deleted" (the GC removes it later, since it names the deleted root).
    expect(details.deleted).not.toContain('Service/partial');
  });
});

/** The object once two reads a second apart show the same resourceVersion (controllers done writing status). */
async function settled<T extends { metadata?: { resourceVersion?: string } }>(read: () => Promise<T>): Promise<T> {
  let last = await read();
  for (;;) {
    await new Promise((r) => setTimeout(r, 1_000));
    const next = await read();
    if (next.metadata?.resourceVersion === last.metadata?.resourceVersion) return next;
    last = next;
  }
}

function withSpec(model: ServedModel, change: (m: ServedModel) => void): ServedModel {
  const copy = structuredClone(model);
  change(copy);
  return copy;
}
