// lookAtModel and the worker's watch against the local control plane: a look reads through the watch's memory, puts
// back a deleted Service or Deployment and a hand-scaled replica count, leaves foreign fields alone, writes nothing
// when nothing drifted, and reports a deleted volume or root object as lost. The watch wakes a model once per burst.
import type { V1ConfigMap, V1Deployment, V1Service } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngineSim, type EngineSim } from '../../../deploy/engine-sim/server.js';
import { overrideEndpoints } from '../../../activities/cluster/endpoints.js';
import { ModelWatcher, type ModelChange } from '../../../activities/cluster/model-watcher.js';
import {
  INFERENCE_POOL_API_VERSION,
  INFERENCE_POOL_KIND,
  type InferencePool,
  pvcName,
  rootName,
} from '../../../activities/builders/index.js';
import { createActivities } from '../../../activities/create-activities.js';
import type { LookInput, ServedModel, ServedModelInput } from '../../../workflows/contract/index.js';
import { activity, rejectionOf, runActivity, testModel } from '../../support/activity-env.js';
import { prepareModel } from '../../support/engine-env.js';
import { useActivityEnv } from '../../support/fixtures.js';
import { adminKubeConfig } from '../../support/kube.js';

const overrides: Record<string, string> = {};
const specs = new Map<string, ServedModel>();
const changes: ModelChange[] = [];
const COALESCE_MS = 1_000;
let watcher: ModelWatcher;
const env = useActivityEnv('act-look', {
  timing: { pollMs: 250 },
  deps: () => ({
    endpoints: overrideEndpoints(() => overrides),
    specs: async (ref) => {
      const spec = specs.get(ref.name);
      if (!spec) throw new Error(`no spec for ${ref.name}`);
      return spec;
    },
  }),
});
const sims: EngineSim[] = [];

beforeAll(async () => {
  watcher = new ModelWatcher(adminKubeConfig(), env.cluster, {
    wake: async (change) => {
      changes.push(change);
    },
    // Wider than the worker's 250 ms so that the burst below is one burst on a loaded 2-core CI machine too.
    coalesceMs: COALESCE_MS,
  });
});
afterAll(async () => {
  await watcher?.stop();
  await Promise.all(sims.map((s) => s.stop()));
});

async function until<T>(read: () => T | Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > end) throw new Error(`condition not met in ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A model rolled out on the local cluster (simulated pods), its spec known to the look, its engine a stand-in. */
async function served(name: string, spec: Partial<ServedModelInput['spec']> = {}) {
  const model = testModel(name, env.ns, { spec: { resources: { gpus: 0 }, ...spec } });
  specs.set(name, model);
  const sim = createEngineSim({ port: 0, servedModelNames: [name], loadDelaySeconds: 0 });
  sims.push(sim);
  overrides[`${env.ns}/${name}`] = `http://127.0.0.1:${(await sim.start()).port}`;
  const rootUid = await prepareModel(model, env.cluster);
  const { generation } = await activity(env.acts.applyEngine, { model, rootUid, sourceHash: 'x' });
  await activity(env.acts.awaitRollout, { model, generation });
  const input: LookInput = {
    ref: { cluster: 'test', namespace: env.ns, name },
    generation: 1,
    rootUid,
    sourceHash: 'x',
    engineGeneration: generation,
  };
  return { model, input };
}

const deploymentOf = (name: string) =>
  env.cluster.get<V1Deployment>({ apiVersion: 'apps/v1', kind: 'Deployment', name, namespace: env.ns });
const serviceOf = (name: string) =>
  env.cluster.get<V1Service>({ apiVersion: 'v1', kind: 'Service', name, namespace: env.ns });

describe('lookAtModel', () => {
  let look: ReturnType<typeof createActivities>['lookAtModel'];
  beforeAll(() => {
    look = createActivities({ ...env.deps, watcher }).lookAtModel;
    watcher.watchNamespace(env.ns);
  });

  it('finds a healthy model as it is and writes nothing', async () => {
    const { input } = await served('calm');
    await until(
      () => watcher.isSynced(env.ns),
      (v) => v,
    );
    const before = await deploymentOf('calm');
    const result = await activity(look, input);
    expect(result).toEqual({
      replicas: 1,
      readyReplicas: 1,
      endpoint: overrides[`${env.ns}/calm`],
      repaired: [],
      engineGeneration: input.engineGeneration,
    });
    expect((await deploymentOf('calm'))!.metadata!.resourceVersion).toBe(before!.metadata!.resourceVersion);
  });

  it('waits delayMs before it looks, and a cancellation ends the wait without a look', async () => {
    const { input } = await served('spaced');
    const started = Date.now();
    expect(await activity(look, { ...input, delayMs: 600 })).toMatchObject({ readyReplicas: 1, repaired: [] });
    expect(Date.now() - started).toBeGreaterThanOrEqual(600);

    const run = runActivity(look, { ...input, delayMs: 30_000 });
    await new Promise((r) => setTimeout(r, 200));
    const cancelledAt = Date.now();
    run.env.cancel();
    const err = await rejectionOf(run.result);
    expect(err.name).toBe('CancelledFailure');
    expect(Date.now() - cancelledAt).toBeLessThan(1_000);
  });

  it('re-creates a deleted Service and a deleted Deployment', async () => {
    const { input } = await served('gone');
    await env.cluster.delete({ apiVersion: 'v1', kind: 'Service', name: 'gone', namespace: env.ns });
    await env.cluster.delete({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'gone', namespace: env.ns });
    // The look reads the watch's memory: wait until it has seen both go.
    await until(
      () => watcher.get('Deployment', env.ns, 'gone') ?? watcher.get('Service', env.ns, 'gone'),
      (v) => v === undefined,
    );
    const result = await activity(look, input);
    expect(result.repaired).toEqual(['Service/gone deleted; re-applied', 'Deployment/gone deleted; re-created']);
    expect(await serviceOf('gone')).toBeDefined();
    const deployment = await deploymentOf('gone');
    expect(deployment!.metadata!.ownerReferences?.[0]?.uid).toBe(input.rootUid);
    expect(result.engineGeneration).toBe(deployment!.metadata!.generation);
    // The new pods are not ready yet, or just became so: either way the look says how many.
    expect(result.replicas).toBe(1);
  });

  it('puts back the admission ConfigMap with the limit in force, and a deleted InferencePool', async () => {
    const { input } = await served('admit', {
      slo: { ttft: '2s', itl: '100ms' },
      inferencePool: { endpointPicker: { name: 'admit-epp' } },
    });
    const admissionRef = { apiVersion: 'v1', kind: 'ConfigMap', name: 'admit-admission', namespace: env.ns };
    const poolRef = {
      apiVersion: INFERENCE_POOL_API_VERSION,
      kind: INFERENCE_POOL_KIND,
      name: 'admit',
      namespace: env.ns,
    };
    await until(
      () => watcher.get<V1ConfigMap>('ConfigMap', env.ns, 'admit-admission'),
      (v) => v !== undefined && v !== null,
    );
    // Applied before any measurement (no limit); a limit is now in force: the look writes it.
    const limited = await activity(look, { ...input, admissionLimit: 6 });
    expect(limited.repaired).toEqual(['ConfigMap/admit-admission edited (data); re-applied']);
    const written = await env.cluster.get<V1ConfigMap>(admissionRef);
    expect(written!.data!['max-concurrency']).toBe('6');
    expect(written!.data!['nginx.conf']).toContain('limit_conn ferry_admission 6;');

    await env.cluster.delete(admissionRef);
    await env.cluster.delete(poolRef);
    await until(
      () => watcher.get('ConfigMap', env.ns, 'admit-admission'),
      (v) => v === undefined,
    );
    const result = await activity(look, { ...input, admissionLimit: 6 });
    expect(result.repaired).toEqual([
      'ConfigMap/admit-admission deleted; re-applied',
      'InferencePool/admit deleted; re-applied',
    ]);
    expect((await env.cluster.get<V1ConfigMap>(admissionRef))!.data!['max-concurrency']).toBe('6');
    expect((await env.cluster.get<InferencePool>(poolRef))!.metadata.ownerReferences?.[0]?.uid).toBe(input.rootUid);

    // Nothing drifted: nothing is written.
    await until(
      () => watcher.get<V1ConfigMap>('ConfigMap', env.ns, 'admit-admission')?.data?.['max-concurrency'],
      (v) => v === '6',
    );
    expect((await activity(look, { ...input, admissionLimit: 6 })).repaired).toEqual([]);
  });

  it('scales a hand-scaled Deployment back, and keeps a foreign annotation', async () => {
    const { input } = await served('scaled');
    await env.cluster.mergePatch(
      { apiVersion: 'apps/v1', kind: 'Deployment', name: 'scaled', namespace: env.ns },
      {
        metadata: { annotations: { 'example.com/owner': 'team-a' } },
        spec: { replicas: 3 },
      },
    );
    await until(
      () => watcher.get<V1Deployment>('Deployment', env.ns, 'scaled'),
      (d) => d?.spec?.replicas === 3,
    );
    const result = await activity(look, input);
    expect(result.repaired).toHaveLength(1);
    expect(result.repaired[0]).toMatch(/^Deployment\/scaled scaled to 3 by .+; back to 1$/);
    const after = await deploymentOf('scaled');
    expect(after!.spec!.replicas).toBe(1);
    expect(after!.metadata!.annotations?.['example.com/owner']).toBe('team-a');
    expect(result.engineGeneration).toBe(after!.metadata!.generation);
  });

  it('puts back labels, annotations and data Ferry set, even when an edit took an object out of the watch', async () => {
    const { input } = await served('relabeled');
    const root = { apiVersion: 'v1', kind: 'ConfigMap', name: rootName('relabeled'), namespace: env.ns };
    const managedBy = 'app.kubernetes.io/managed-by';
    // Without the managed-by label the watch's selector no longer matches: these look deleted in its memory.
    await env.cluster.mergePatch(root, {
      metadata: { labels: { [managedBy]: null }, annotations: { 'example.com/note': 'kept' } },
      data: { servedModelName: 'someone-else', extra: 'kept' },
    });
    await env.cluster.mergePatch(
      { apiVersion: 'apps/v1', kind: 'Deployment', name: 'relabeled', namespace: env.ns },
      { metadata: { labels: { [managedBy]: null } } },
    );
    await env.cluster.mergePatch(
      { apiVersion: 'v1', kind: 'Service', name: 'relabeled', namespace: env.ns },
      { metadata: { labels: { 'ferry.dev/model': 'other' } } },
    );
    await until(
      () => watcher.get('ConfigMap', env.ns, rootName('relabeled')) ?? watcher.get('Deployment', env.ns, 'relabeled'),
      (v) => v === undefined,
    );
    const result = await activity(look, input);
    expect(result.lost).toBeUndefined();
    expect(result.repaired).toEqual([
      `ConfigMap/${rootName('relabeled')} edited (labels, data); re-applied`,
      'Service/relabeled labels edited; re-applied',
      'Deployment/relabeled labels edited; re-applied',
    ]);
    const after = await env.cluster.get<V1ConfigMap>(root);
    expect(after!.metadata!.uid).toBe(input.rootUid);
    expect(after!.metadata!.labels?.[managedBy]).toBe('ferry');
    expect(after!.data).toMatchObject({ servedModelName: 'relabeled', extra: 'kept' });
    expect(after!.metadata!.annotations?.['example.com/note']).toBe('kept');
    expect((await deploymentOf('relabeled'))!.metadata!.labels?.[managedBy]).toBe('ferry');
    expect((await serviceOf('relabeled'))!.metadata!.labels?.['ferry.dev/model']).toBe('relabeled');
    // Put back, the objects are in the watch's memory again, and the next look finds nothing to do.
    await until(
      () => watcher.get('Deployment', env.ns, 'relabeled'),
      (v) => v !== undefined,
    );
    expect((await activity(look, input)).repaired).toEqual([]);
  });

  it("repairs nothing of a tenant's model that its grant no longer allows, and says why", async () => {
    const { input } = await served('narrowed');
    const grants = async (tenant: string) =>
      tenant === 'team-a' ? `tenant team-a may not serve into namespace ${env.ns}` : undefined;
    const guarded = createActivities({ ...env.deps, watcher, grants }).lookAtModel;
    await env.cluster.delete({ apiVersion: 'v1', kind: 'Service', name: 'narrowed', namespace: env.ns });
    await until(
      () => watcher.get('Service', env.ns, 'narrowed'),
      (v) => v === undefined,
    );
    const refused = await activity(guarded, { ...input, tenant: 'team-a' });
    expect(refused).toMatchObject({
      repaired: [],
      problem: {
        reason: 'Forbidden',
        message: `tenant team-a may not serve into namespace ${env.ns}: nothing is repaired until the grant or the model changes`,
      },
    });
    expect(await serviceOf('narrowed')).toBeUndefined();
    // Another tenant's grant allows it, and an admin's model (no tenant) is not checked: both are repaired.
    expect((await activity(guarded, { ...input, tenant: 'team-b' })).repaired).toEqual([
      'Service/narrowed deleted; re-applied',
    ]);
    expect(await serviceOf('narrowed')).toBeDefined();
  });

  it('reports a weights volume being deleted, and a deleted root object, as lost', async () => {
    const { model, input } = await served('unmoored');
    const pvc = { apiVersion: 'v1', kind: 'PersistentVolumeClaim', name: pvcName('unmoored'), namespace: env.ns };
    await env.cluster.delete(pvc);
    const terminating = await until(
      () => activity(look, input),
      (r) => r.lost !== undefined,
    );
    // The engine's pod still uses it, so it stays (Terminating) until the engine lets go.
    expect(terminating.lost).toEqual({
      object: `PersistentVolumeClaim/${pvcName('unmoored')}`,
      reason: 'VolumeTerminating',
      message: `the weights volume ${env.ns}/${pvcName('unmoored')} is being deleted (it stays until the engine lets go); it is provisioned and filled again`,
    });
    await env.cluster.delete({ apiVersion: 'v1', kind: 'ConfigMap', name: rootName('unmoored'), namespace: env.ns });
    const rootless = await until(
      () => activity(look, input),
      (r) => r.lost?.reason === 'RootMissing',
    );
    expect(rootless.lost!.object).toBe(`ConfigMap/${rootName(model.metadata.name)}`);
  });
});

describe('the worker watch', () => {
  it('wakes a model once for a burst of changes to its objects, naming them', async () => {
    await served('woken');
    await until(
      () => watcher.isSynced(env.ns),
      (v) => v,
    );
    // Let the serve's own changes (pods and ReplicaSets coming Ready) settle into their wakes: wait until no wake for
    // this model has come for two windows, then start counting.
    await until(
      async () => {
        const before = changes.length;
        await new Promise((r) => setTimeout(r, 2 * COALESCE_MS));
        return changes.length === before;
      },
      (quiet) => quiet,
      30_000,
    );
    changes.length = 0;
    await Promise.all([
      env.cluster.delete({ apiVersion: 'v1', kind: 'Service', name: 'woken', namespace: env.ns }),
      env.cluster.mergePatch(
        { apiVersion: 'apps/v1', kind: 'Deployment', name: 'woken', namespace: env.ns },
        { metadata: { annotations: { touched: 'yes' } } },
      ),
    ]);
    const woken = await until(
      () => changes.filter((c) => c.name === 'woken'),
      (c) => c.length > 0,
    );
    // A second wake, if the burst were split, would come one window after its first event.
    await new Promise((r) => setTimeout(r, COALESCE_MS + 500));
    const all = changes.filter((c) => c.name === 'woken');
    expect(all).toHaveLength(1);
    expect(woken[0]).toMatchObject({ namespace: env.ns, name: 'woken' });
    expect(all[0]!.objects).toEqual(expect.arrayContaining(['Service/woken', 'Deployment/woken']));
  });

  it('reads from memory what the API server holds', async () => {
    const { model } = await served('mirror');
    const live = await deploymentOf('mirror');
    const cached = await until(
      () => watcher.get<V1Deployment>('Deployment', env.ns, 'mirror'),
      (d) => d?.metadata?.resourceVersion === live!.metadata!.resourceVersion,
    );
    expect(cached!.metadata!.uid).toBe(live!.metadata!.uid);
    expect(watcher.list('Pod', env.ns, `app.kubernetes.io/instance=${model.metadata.name}`)!.length).toBeGreaterThan(0);
    expect(watcher.get('Deployment', 'not-watched', 'x')).toBeNull();
  });
});
