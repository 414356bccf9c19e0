// A NetworkPolicy per model (FERRY_NETWORK_POLICY=on, docs/design/network-policy.md) against the local control plane,
// every step run as the worker's ServiceAccount under the Role the chart renders with networkPolicy.enabled: the
// policy is applied before the engine, the engine pods get the gate, a look puts back a deleted or edited policy (read
// through the watch, which wakes the model when it changes) and rolls the gate in or out when the setting changes,
// and the teardown deletes the policy. What is real: the API server's validation of every object, RBAC, the watch,
// the garbage collector. What nothing here shows: a connection refused. The local stack has no network plugin (KWOK
// pods and the node agent's have no pod network), so no policy is enforced; that is the cluster's plugin's work.
import {
  KubernetesObjectApi,
  type V1ConfigMap,
  type V1Deployment,
  type V1NetworkPolicy,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeConfigForServiceAccount } from '../../../deploy/local/service-account-kubeconfig.js';
import { createEngineSim, type EngineSim } from '../../../deploy/engine-sim/server.js';
import { Cluster } from '../../../activities/cluster/api.js';
import { overrideEndpoints } from '../../../activities/cluster/endpoints.js';
import { ModelWatcher, type ModelChange } from '../../../activities/cluster/model-watcher.js';
import { createActivities } from '../../../activities/create-activities.js';
import type { ActivityDeps } from '../../../activities/deps.js';
import type { NetworkPolicyPeer } from '../../../activities/builders/index.js';
import type { LookInput, ServedModel } from '../../../workflows/contract/index.js';
import { networkPolicyOf } from '../../../worker/network-policy-setting.js';
import { activity, testDeps, testModel } from '../../support/activity-env.js';
import { prepareModel } from '../../support/engine-env.js';
import { RESTRICTED, useNamespace } from '../../support/fixtures.js';
import { renderChart } from '../../support/helm.js';

const served = useNamespace('act-netpol', RESTRICTED);
const system = useNamespace('act-netpol-system', RESTRICTED);
const specs = new Map<string, ServedModel>();
const overrides: Record<string, string> = {};
const changes: ModelChange[] = [];
const sims: EngineSim[] = [];
let on: ActivityDeps;
let off: ActivityDeps;
let peer: NetworkPolicyPeer;
let watcher: ModelWatcher;

beforeAll(async () => {
  const release = renderChart({
    release: 'ferry-worker',
    namespace: system.ns,
    values: { namespaces: [served.ns], networkPolicy: { enabled: true } },
  });
  // The worker's account and its Role; the worker itself runs here as this test.
  const objects = served.kc.makeApiClient(KubernetesObjectApi);
  for (const o of release.filter((r) => ['ServiceAccount', 'Role', 'RoleBinding'].includes(r.kind!))) {
    await objects.create(o);
  }
  // The peer as the worker reads it from the chart's environment (the kubelet fills in the namespace).
  const env = release.find((o) => o.kind === 'Deployment') as V1Deployment;
  const value = (name: string) => env.spec!.template.spec!.containers[0]!.env!.find((e) => e.name === name)?.value;
  const problems: string[] = [];
  peer = networkPolicyOf(
    {},
    {
      FERRY_NETWORK_POLICY: value('FERRY_NETWORK_POLICY')!,
      FERRY_WORKER_NAMESPACE: system.ns,
      FERRY_WORKER_POD_LABELS: value('FERRY_WORKER_POD_LABELS')!,
      FERRY_ENDPOINT_MODE: value('FERRY_ENDPOINT_MODE')!,
    },
    problems,
  )!;
  expect(problems).toEqual([]);
  const cluster = new Cluster(await kubeConfigForServiceAccount(served.kc, system.ns, 'ferry-worker'));
  watcher = new ModelWatcher(served.kc, served.cluster, {
    wake: async (change) => void changes.push(change),
    networkPolicies: true,
  });
  watcher.watchNamespace(served.ns);
  off = {
    ...testDeps({ pollMs: 250 }),
    cluster,
    endpoints: overrideEndpoints(() => overrides),
    specs: async (ref) => specs.get(ref.name)!,
  };
  on = { ...off, networkPolicy: peer };
});

afterAll(async () => {
  await watcher?.stop();
  await Promise.all(sims.map((s) => s.stop()));
});

async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > end) throw new Error(`${what}: not so within ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const ref = (kind: string, apiVersion: string, name: string) => ({ apiVersion, kind, name, namespace: served.ns });
const policyOf = (name: string) =>
  served.cluster.get<V1NetworkPolicy>(ref('NetworkPolicy', 'networking.k8s.io/v1', name));
const containersOf = async (name: string) =>
  (await served.cluster.get<V1Deployment>(ref('Deployment', 'apps/v1', name)))!.spec!.template.spec!.containers.map(
    (c) => c.name,
  );

/** A model whose engine `deps` applied (root and volume first), its spec known to the look, its engine a stand-in. */
async function applied(name: string, deps: ActivityDeps): Promise<LookInput> {
  const model = testModel(name, served.ns, { spec: { resources: { gpus: 0 } } });
  specs.set(name, model);
  const sim = createEngineSim({ port: 0, servedModelNames: [name], loadDelaySeconds: 0 });
  sims.push(sim);
  overrides[`${served.ns}/${name}`] = `http://127.0.0.1:${(await sim.start()).port}`;
  const rootUid = await prepareModel(model, served.cluster);
  const { generation } = await activity(createActivities(deps).applyEngine, { model, rootUid, sourceHash: 'x' });
  return {
    ref: { cluster: 'test', namespace: served.ns, name },
    generation: 1,
    rootUid,
    sourceHash: 'x',
    engineGeneration: generation,
  };
}

describe('with FERRY_NETWORK_POLICY=on', () => {
  it('applies the policy with the engine, puts it back when deleted or edited, and deletes it with the model', async () => {
    const input = await applied('gated', on);
    const acts = createActivities({ ...on, watcher });
    const policy = (await policyOf('gated'))!;
    expect(policy.metadata?.ownerReferences?.[0]?.uid).toBe(input.rootUid);
    expect(policy.spec?.podSelector.matchLabels).toMatchObject({ 'app.kubernetes.io/instance': 'gated' });
    // As the API server keeps it: `http` open, `engine` only to the worker's namespace and pods.
    expect(policy.spec?.ingress?.map((r) => [r._from ?? null, r.ports])).toEqual([
      [null, [{ protocol: 'TCP', port: 'http' }]],
      [
        [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': system.ns } },
            podSelector: { matchLabels: peer.podLabels },
          },
        ],
        [{ protocol: 'TCP', port: 'engine' }],
      ],
    ]);
    expect(await containersOf('gated')).toEqual(['vllm', 'admission']);
    const gate = await served.cluster.get<V1ConfigMap>(ref('ConfigMap', 'v1', 'gated-admission'));
    expect(gate?.data?.['nginx.conf']).toContain("return 403 '");
    await until('the watch to list the policy', async () => watcher.get('NetworkPolicy', served.ns, 'gated'), Boolean);
    expect((await activity(acts.lookAtModel, input)).repaired).toEqual([]);

    // Deleted: the watch wakes the model, and its look puts the policy back.
    changes.length = 0;
    await served.cluster.delete(ref('NetworkPolicy', 'networking.k8s.io/v1', 'gated'), 'Background');
    await until(
      'a wake',
      async () => changes,
      (c) => c.some((x) => x.objects.includes('NetworkPolicy/gated')),
    );
    await until(
      'the watch to forget it',
      async () => watcher.get('NetworkPolicy', served.ns, 'gated'),
      (p) => !p,
    );
    expect((await activity(acts.lookAtModel, input)).repaired).toEqual(['NetworkPolicy/gated deleted; re-applied']);
    expect((await policyOf('gated'))?.spec?.ingress).toHaveLength(2);

    // Opened to everyone by hand: the look closes it again.
    await served.cluster.mergePatch(ref('NetworkPolicy', 'networking.k8s.io/v1', 'gated'), { spec: { ingress: [{}] } });
    await until(
      'the watch to see the edit',
      async () => watcher.get<V1NetworkPolicy>('NetworkPolicy', served.ns, 'gated'),
      (p) => p?.spec?.ingress?.length === 1,
    );
    expect((await activity(acts.lookAtModel, input)).repaired).toEqual([
      'NetworkPolicy/gated edited (spec); re-applied',
    ]);
    expect((await policyOf('gated'))?.spec?.ingress).toHaveLength(2);

    const teardown = await activity(acts.tearDown, { model: specs.get('gated')! });
    expect(teardown.deleted).toContain('NetworkPolicy/gated');
    expect(await policyOf('gated')).toBeUndefined();
  });

  it('rolls the gate in when the setting is turned on, and out when it is turned off', async () => {
    const input = await applied('turned', off);
    expect(await containersOf('turned')).toEqual(['vllm']);
    expect(await policyOf('turned')).toBeUndefined();

    const turnedOn = await activity(createActivities(on).lookAtModel, input);
    expect(turnedOn.repaired).toEqual([
      'NetworkPolicy/turned deleted; re-applied',
      'ConfigMap/turned-admission deleted; re-applied',
      'Deployment/turned has no gate sidecar (FERRY_NETWORK_POLICY=on); re-applied with one',
    ]);
    expect(turnedOn.engineGeneration).toBeGreaterThan(input.engineGeneration!);
    expect(await containersOf('turned')).toEqual(['vllm', 'admission']);
    // Nothing more to do on the next look.
    const again = { ...input, engineGeneration: turnedOn.engineGeneration! };
    expect((await activity(createActivities(on).lookAtModel, again)).repaired).toEqual([]);

    // Off: the gate goes; the policy, which a worker without the setting may not touch, stays (its `http` rule then
    // names the engine's own port, open as before) and goes with the model's root.
    const turnedOff = await activity(createActivities(off).lookAtModel, again);
    expect(turnedOff.repaired).toEqual([
      'Deployment/turned has a gate sidecar the worker no longer asks for (FERRY_NETWORK_POLICY is off); re-applied without',
    ]);
    expect(await containersOf('turned')).toEqual(['vllm']);
    const teardown = await activity(createActivities(off).tearDown, { model: specs.get('turned')! });
    expect(teardown.deleted).not.toContain('NetworkPolicy/turned');
    await until(
      'the garbage collector to delete the policy',
      () => policyOf('turned'),
      (p) => p === undefined,
      60_000,
    );
  });
});
