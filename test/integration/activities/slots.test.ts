// A model's two slots (docs/design/rollout.md, section 2) against the real API server, controllers and scheduler: a
// second revision's volume, Deployment and engine Service applied in slot b beside slot a's, its rollout and health
// awaited on its own objects, the front sharing requests between the two — counted through the local stack, whose
// supervisor plays the front's pods with HAProxy and each slot's engine with its own stand-in — a look that keeps slot
// b's objects when the current revision is there, and a teardown that removes both slots.
import type { V1Deployment, V1PersistentVolumeClaim, V1Service } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { FRONT_CONFIG_HASH, frontName, LABEL_MODEL, rootName } from '../../../activities/builders/index.js';
import { REVISION_HEADER } from '../../../activities/builders/front.js';
import { overrideEndpoints } from '../../../activities/cluster/endpoints.js';
import type { RevisionShare, ServedModel } from '../../../workflows/contract/index.js';
import { activity, testModel } from '../../support/activity-env.js';
import { getOnce, localUrls, modelObjects } from '../../support/e2e.js';
import { prepareModel } from '../../support/engine-env.js';
import { useActivityEnv } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

const specs = new Map<string, ServedModel>();
const env = useActivityEnv('act-slots', {
  timing: { pollMs: 250 },
  deps: () => ({
    // The local stack's supervisor: a stand-in per engine pod, keyed by its instance (`<model>` or `<model>-b`).
    endpoints: overrideEndpoints(() => localUrls()),
    specs: async (ref) => specs.get(ref.name)!,
  }),
});

const get = <T>(apiVersion: string, kind: string, name: string) =>
  env.cluster.get<T & { kind?: string }>({ apiVersion, kind, name, namespace: env.ns });

/**
 * Sends `n` requests through the model's Service as the local stack plays it, each on a connection of its own (as the
 * Service picks a pod per connection, one opened while the engine alone answered would still reach it); counts them
 * by revision.
 */
async function answeredBy(name: string, n: number): Promise<Record<string, number>> {
  const key = `${env.ns}/${name}`;
  await waitFor("the model's Service on the front", 60_000, async () => localUrls()[key]);
  // The local stack's Service port goes to the stand-in until its HAProxy for a front pod runs, which can be a moment
  // after the pod is ready (in a cluster the Service would have no endpoint yet): first a front's answer. What was
  // answered is kept, so that a wait that ends says what it saw.
  await waitFor('a front pod answering', 120_000, async () => {
    const url = localUrls()[key]!;
    const res = await getOnce(`${url}/v1/models`);
    if (res.status === 200 && res.headers[REVISION_HEADER] !== undefined) return true;
    throw new Error(`${url} answered HTTP ${res.status} with no ${REVISION_HEADER}`);
  });
  const counts: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const res = await getOnce(`${localUrls()[key]!}/v1/models`);
    const revision = res.headers[REVISION_HEADER];
    const k = res.status === 200 ? (typeof revision === 'string' ? revision : 'none') : `HTTP ${res.status}`;
    counts[k] = (counts[k] ?? 0) + 1;
  }
  return counts;
}

describe("a model's second slot", { timeout: 300_000 }, () => {
  it('holds a second revision beside the first, behind the front at its share; a look keeps it; teardown takes both', async () => {
    const name = 'twin';
    const model = testModel(name, env.ns, {
      labels: { 'sim.ferry.dev/load-delay-seconds': '0' },
      spec: { resources: { gpus: 0 }, front: { holdFor: '1m' } },
    });
    specs.set(name, model);
    const rootUid = await prepareModel(model, env.cluster);
    const objects = { model, rootUid, sourceHash: 'x' };
    const first: RevisionShare[] = [{ revision: 'r1', slot: 'a', weight: 100 }];
    const a = await activity(env.acts.applyEngine, { ...objects, shares: first });
    await activity(env.acts.awaitRollout, { model, generation: a.generation });
    await activity(env.acts.awaitHealth, { model });
    expect(await answeredBy(name, 10)).toEqual({ r1: 10 });

    // Slot b: its own volume, engine Service and Deployment, selecting only its own pods.
    const storage = await activity(env.acts.applyStorage, { ...objects, slot: 'b' });
    expect(storage.pvcName).toBe(`${name}-b-weights`);
    const pvc = await get<V1PersistentVolumeClaim>('v1', 'PersistentVolumeClaim', `${name}-b-weights`);
    expect(pvc?.metadata?.labels?.[LABEL_MODEL]).toBe(name);
    expect(pvc?.metadata?.ownerReferences?.[0]).toMatchObject({ name: rootName(name), uid: rootUid });
    const split: RevisionShare[] = [
      { revision: 'r1', slot: 'a', weight: 50 },
      { revision: 'r2', slot: 'b', weight: 50 },
    ];
    const b = await activity(env.acts.applyEngine, { ...objects, slot: 'b', shares: first });
    await activity(env.acts.awaitRollout, { model, generation: b.generation, slot: 'b' });
    const health = await activity(env.acts.awaitHealth, { model, slot: 'b' });
    // What clients are told is the model's Service, whichever slot was checked.
    expect(health.endpoint).toBe(localUrls()[`${env.ns}/${name}`]);
    // And where slot b alone answers, for a rollout's evaluation gate.
    expect(health.engineEndpoint).toMatch(/^http:\/\//);
    expect(health.engineEndpoint).toBe(localUrls()[`${env.ns}/${name}-b`]);
    const deployment = await get<V1Deployment>('apps/v1', 'Deployment', `${name}-b`);
    const selector = deployment?.spec?.selector.matchLabels ?? {};
    expect(selector['app.kubernetes.io/instance']).toBe(`${name}-b`);
    expect(deployment?.spec?.template.spec?.volumes?.[0]?.persistentVolumeClaim?.claimName).toBe(`${name}-b-weights`);
    const service = await get<V1Service>('v1', 'Service', `${name}-b`);
    expect(service?.spec?.selector).toEqual(selector);
    // Slot a's Deployment and Service are unchanged by it.
    const aDeployment = await get<V1Deployment>('apps/v1', 'Deployment', name);
    expect(aDeployment?.metadata?.generation).toBe(a.generation);
    expect((await get<V1Service>('v1', 'Service', `${name}-engine`))?.spec?.selector).toMatchObject({
      'app.kubernetes.io/instance': name,
    });

    // The front at 50/50 (applied, and every front pod running it): both revisions answer through the model's Service.
    // No old front pod is left, not even one finishing what it held (the local stack keeps a deleted front pod in the
    // API until its HAProxy has exited, as a kubelet does): once the shift is done, no request goes by the old shares.
    expect(await activity(env.acts.shiftTraffic, { ...objects, shares: split })).toEqual({ frontPods: 2 });
    const front = await get<V1Deployment>('apps/v1', 'Deployment', frontName(name));
    const hash = front?.spec?.template.metadata?.annotations?.[FRONT_CONFIG_HASH];
    const pods = await env.core.listNamespacedPod({
      namespace: env.ns,
      labelSelector: 'app.kubernetes.io/component=front',
    });
    expect(
      pods.items.map((p) => [p.metadata?.annotations?.[FRONT_CONFIG_HASH], p.metadata?.deletionTimestamp]),
    ).toEqual([
      [hash, undefined],
      [hash, undefined],
    ]);
    await waitFor('both revisions answering through the front', 90_000, async () => {
      const counts = await answeredBy(name, 20);
      return counts.r1 && counts.r2 ? counts : undefined;
    });
    const both = await answeredBy(name, 200);
    expect(Object.keys(both).sort()).toEqual(['r1', 'r2']);
    expect(Math.abs(both.r2! / 200 - 0.5)).toBeLessThanOrEqual(0.1);

    // Slot b current: a look keeps its objects (a deleted Deployment comes back), not slot a's.
    const current: RevisionShare[] = [{ revision: 'r2', slot: 'b', weight: 100 }];
    await activity(env.acts.applyEngine, { ...objects, slot: 'b', shares: current });
    await env.cluster.delete({ apiVersion: 'apps/v1', kind: 'Deployment', name: `${name}-b`, namespace: env.ns });
    await waitFor(
      'the deleted Deployment gone',
      30_000,
      async () => !(await get('apps/v1', 'Deployment', `${name}-b`)),
    );
    const look = await activity(env.acts.lookAtModel, {
      ref: { cluster: model.spec.cluster, namespace: env.ns, name },
      generation: 1,
      rootUid,
      sourceHash: 'x',
      shares: current,
      slot: 'b',
    });
    expect(look.repaired).toEqual([`Deployment/${name}-b deleted; re-created`]);
    expect(look.lost).toBeUndefined();
    await waitFor('r2 alone answering', 90_000, async () => {
      const counts = await answeredBy(name, 10);
      return counts.r2 === 10;
    });

    await activity(env.acts.tearDown, { model });
    await waitFor('every object of both slots gone', 60_000, async () => {
      const left = await modelObjects(env, env.ns, name);
      return left.length === 0 ? true : undefined;
    });
  });
});
