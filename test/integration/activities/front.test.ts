// A model's front (`spec.front`; activities/steps/front.ts) against the real API server, controllers and scheduler, in
// a namespace that enforces Pod Security "restricted": applyEngine applies the engine's own Service, the front's
// configuration and its HAProxy before the model's Service points at them; a look puts back a part someone deleted;
// an update without the front points the Service back at the engine pods and removes the front; teardown removes it.
// The front's pods are simulated here (KWOK runs nothing); what HAProxy does with the configuration is
// test/integration/front/hold.test.ts's.
import {
  PatchStrategy,
  setHeaderOptions,
  type V1ConfigMap,
  type V1Deployment,
  type V1Service,
} from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { FRONT_CONFIG_HASH, frontSelectorLabels, selectorLabels } from '../../../activities/builders/index.js';
import { overrideEndpoints } from '../../../activities/cluster/endpoints.js';
import { labelSelectorOf } from '../../../activities/cluster/model-reads.js';
import { createActivities } from '../../../activities/create-activities.js';
import { createEngineSim, type EngineSim } from '../../../deploy/engine-sim/server.js';
import { FAILURE, type ServedModel } from '../../../workflows/contract/index.js';
import { activity, rejectionOf, runActivity, testModel } from '../../support/activity-env.js';
import { prepareModel } from '../../support/engine-env.js';
import { RESTRICTED, useActivityEnv } from '../../support/fixtures.js';
import { restrictedPod, waitFor } from '../../support/kube.js';

const overrides: Record<string, string> = {};
const specs = new Map<string, ServedModel>();
const env = useActivityEnv('act-front', {
  labels: RESTRICTED,
  timing: { pollMs: 250 },
  deps: () => ({
    endpoints: overrideEndpoints(() => overrides),
    specs: async (ref) => specs.get(ref.name)!,
  }),
});
const sims: EngineSim[] = [];
afterAll(async () => {
  await Promise.all(sims.map((s) => s.stop()));
});

const get = <T>(apiVersion: string, kind: string, name: string) =>
  env.cluster.get<T & { kind?: string }>({ apiVersion, kind, name, namespace: env.ns });
const objectsOf = async (name: string) => ({
  service: await get<V1Service>('v1', 'Service', name),
  engineService: await get<V1Service>('v1', 'Service', `${name}-engine`),
  config: await get<V1ConfigMap>('v1', 'ConfigMap', `${name}-front`),
  haproxy: await get<V1Deployment>('apps/v1', 'Deployment', `${name}-front`),
});
/** A finalizer of this test's: a front pod that finishes what it holds for as long as it is there. */
const HOLD = 'test.ferry.dev/draining';
const live = (o: { metadata?: { deletionTimestamp?: unknown } } | undefined) => !!o && !o.metadata?.deletionTimestamp;

/** A model with a front, its root and volume in place, its engine a stand-in the worker reaches by override. */
async function fronted(name: string) {
  const model = testModel(name, env.ns, { spec: { resources: { gpus: 0 }, front: { holdFor: '2m' } } });
  specs.set(name, model);
  const sim = createEngineSim({ port: 0, servedModelNames: [name], loadDelaySeconds: 0 });
  sims.push(sim);
  overrides[`${env.ns}/${name}`] = `http://127.0.0.1:${(await sim.start()).port}`;
  const rootUid = await prepareModel(model, env.cluster);
  return { model, rootUid, sourceHash: 'x' };
}

describe('a model with spec.front', () => {
  it('is applied with its front, the Service on the front pods; a look puts back a deleted part', async () => {
    const input = await fronted('held');
    const { generation } = await activity(env.acts.applyEngine, input);
    await activity(env.acts.awaitRollout, { model: input.model, generation });
    const { service, engineService, config, haproxy } = await objectsOf('held');
    // The model's Service keeps its name and port and selects the front; the engine has a Service of its own.
    expect(service?.spec?.selector).toEqual(frontSelectorLabels('held'));
    expect(engineService?.spec?.selector).toEqual(selectorLabels('held'));
    expect(engineService?.spec?.ports).toEqual(service?.spec?.ports);
    expect(config?.data?.['haproxy.cfg']).toContain(`server r1 held-engine.${env.ns}.svc:8000 weight 100 maxconn 1024`);
    expect(config?.data?.['haproxy.cfg']).toContain('timeout queue 120s');
    // Two front pods, admitted under "restricted", on the Service's selector.
    expect(haproxy?.spec?.replicas).toBe(2);
    await waitFor('the front pods ready', 60_000, async () => {
      const d = await get<V1Deployment>('apps/v1', 'Deployment', 'held-front');
      return d?.status?.readyReplicas === 2;
    });
    const health = await activity(env.acts.awaitHealth, { model: input.model });
    expect(health.endpoint).toBe(overrides[`${env.ns}/held`]);

    // Someone deletes the configuration and scales HAProxy away: the look puts both back.
    await env.core.deleteNamespacedConfigMap({ name: 'held-front', namespace: env.ns });
    await env.cluster.mergePatch(
      { apiVersion: 'apps/v1', kind: 'Deployment', name: 'held-front', namespace: env.ns },
      { spec: { replicas: 0 } },
    );
    const look = createActivities({ ...env.deps }).lookAtModel;
    const result = await activity(look, {
      ref: { cluster: 'test', namespace: env.ns, name: 'held' },
      generation: 1,
      rootUid: input.rootUid,
      sourceHash: 'x',
      engineGeneration: generation,
    });
    expect(result.repaired).toEqual([
      'ConfigMap/held-front deleted; re-applied',
      'Deployment/held-front edited (spec); re-applied',
    ]);
    const repaired = await objectsOf('held');
    expect(repaired.config?.data).toEqual(config?.data);
    expect(repaired.haproxy?.spec?.replicas).toBe(2);
  });

  it("is rolled out only once a front pod is ready: the model's Service selects them", async () => {
    const input = await fronted('fronted-late');
    const { generation } = await activity(env.acts.applyEngine, input);
    // No front pod at all (someone scaled HAProxy away): the wait says so and does not end.
    await env.cluster.mergePatch(
      { apiVersion: 'apps/v1', kind: 'Deployment', name: 'fronted-late-front', namespace: env.ns },
      { spec: { replicas: 0 } },
    );
    const waiting = runActivity(env.acts.awaitRollout, { model: input.model, generation });
    await waitFor('a heartbeat about the front', 30_000, async () =>
      waiting.heartbeats.some((h) => h.step === 'rollout' && h.state === 'FrontStarting'),
    );
    expect(waiting.heartbeats.find((h) => h.state === 'FrontStarting')?.message).toBe(
      'no pod of the front fronted-late-front is ready yet',
    );
    let done = false;
    void waiting.result.finally(() => (done = true));
    expect(done).toBe(false);
    // HAProxy back: the rollout ends with it.
    await env.cluster.mergePatch(
      { apiVersion: 'apps/v1', kind: 'Deployment', name: 'fronted-late-front', namespace: env.ns },
      { spec: { replicas: 2 } },
    );
    expect((await waiting.result).readyReplicas).toBe(1);
    expect(
      (await get<V1Deployment>('apps/v1', 'Deployment', 'fronted-late-front'))?.status?.readyReplicas,
    ).toBeGreaterThan(0);
  });

  it('an update without it points the Service back at the engine, then removes it; teardown removes a front', async () => {
    const input = await fronted('unheld');
    await activity(env.acts.applyEngine, input);
    const without = testModel('unheld', env.ns, { spec: { resources: { gpus: 0 } } });
    await activity(env.acts.applyEngine, { ...input, model: without });
    expect((await objectsOf('unheld')).service?.spec?.selector).toEqual(selectorLabels('unheld'));
    await waitFor('the front gone', 30_000, async () => {
      const left = await objectsOf('unheld');
      return !live(left.engineService) && !live(left.config) && !live(left.haproxy);
    });

    await activity(env.acts.applyEngine, input);
    expect(live((await objectsOf('unheld')).haproxy)).toBe(true);
    const torn = await activity(env.acts.tearDown, { model: input.model });
    expect(torn.deleted).toEqual(
      expect.arrayContaining(['Service/unheld-engine', 'ConfigMap/unheld-front', 'Deployment/unheld-front']),
    );
  });

  it("never takes over an object of the front's name that is not the model's: NameConflict, nothing applied", async () => {
    const input = await fronted('clash');
    await env.core.createNamespacedConfigMap({
      namespace: env.ns,
      body: { metadata: { name: 'clash-front', labels: { team: 'search' } }, data: { mine: 'yes' } },
    });
    const failed = await rejectionOf(activity(env.acts.applyEngine, input));
    expect(failed).toMatchObject({ type: FAILURE.NameConflict });
    const left = await objectsOf('clash');
    expect(left.config?.data).toEqual({ mine: 'yes' });
    expect(left.service).toBeUndefined();
    expect(left.haproxy).toBeUndefined();
  });
  it('moves the requests only once every old front pod is gone: one still finishing what it holds is waited for, one past its deletion deadline is not', async () => {
    const input = await fronted('moved');
    const { generation } = await activity(env.acts.applyEngine, input);
    await activity(env.acts.awaitRollout, { model: input.model, generation });
    const selector = labelSelectorOf(frontSelectorLabels('moved'));
    const frontPods = async () =>
      (await env.core.listNamespacedPod({ namespace: env.ns, labelSelector: selector })).items;
    const old = await waitFor('both front pods running', 60_000, async () => {
      const pods = await frontPods();
      return pods.length === 2 && pods.every((p) => p.status?.phase === 'Running') ? pods : undefined;
    });
    const oldNames = old.map((p) => p.metadata!.name!).sort();
    // The old pods finish what they hold as long as this finalizer says (a kubelet draining them, in a cluster).
    const finalizers = (name: string, body: object) =>
      env.core.patchNamespacedPod(
        { name, namespace: env.ns, body: { metadata: body } },
        setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
      );
    for (const name of oldNames) await finalizers(name, { finalizers: [HOLD] });
    // And one of an earlier front, deleted at once on a node that never answers: past its deletion deadline.
    const lost = restrictedPod('moved-front-lost');
    lost.metadata = {
      name: 'moved-front-lost',
      labels: frontSelectorLabels('moved'),
      annotations: { [FRONT_CONFIG_HASH]: 'earlier' },
      finalizers: [HOLD],
    };
    lost.spec!.nodeSelector = { 'sim.ferry.dev/nowhere': 'true' };
    await env.core.createNamespacedPod({ namespace: env.ns, body: lost });
    await env.core.deleteNamespacedPod({ name: 'moved-front-lost', namespace: env.ns, gracePeriodSeconds: 0 });

    const shifting = runActivity(env.acts.shiftTraffic, {
      ...input,
      shares: [{ revision: 'r2', slot: 'a', weight: 100 }],
    });
    let done = false;
    void shifting.result.finally(() => (done = true));
    const waiting = await waitFor('the old pods named, the lost one not', 60_000, async () =>
      shifting.heartbeats.find(
        (h) =>
          h.state === 'OldFrontPodsFinishing' &&
          h.message ===
            `the front moving to r2 100%: 2 old front pods finishing what they hold (${oldNames.join(', ')})`,
      ),
    );
    expect(waiting.step).toBe('shift');
    expect(done).toBe(false);
    // The old pods let go: the shift ends, every front pod on the new configuration.
    for (const name of oldNames) await finalizers(name, { '$deleteFromPrimitiveList/finalizers': [HOLD] });
    expect(await shifting.result).toEqual({ frontPods: 2 });
    const now = await frontPods();
    const hash = (await get<V1Deployment>('apps/v1', 'Deployment', 'moved-front'))?.spec?.template.metadata
      ?.annotations?.[FRONT_CONFIG_HASH];
    expect(
      now
        .filter((p) => p.metadata?.name !== 'moved-front-lost')
        .map((p) => p.metadata?.annotations?.[FRONT_CONFIG_HASH]),
    ).toEqual([hash, hash]);
    await finalizers('moved-front-lost', { '$deleteFromPrimitiveList/finalizers': [HOLD] });
  });
});
