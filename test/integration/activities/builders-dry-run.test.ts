import type { KubernetesObject, V1PodTemplateSpec } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { buildAll, FIELD_MANAGER, objectList } from '../../../activities/builders/index.js';
import {
  FIXTURE_NAMES,
  FIXTURE_ROOT_UID,
  fixtureModel,
  fixtureObjectList,
  fixtureObjects,
} from '../../unit/fixtures.js';
import { RESTRICTED, useNamespace } from '../../support/fixtures.js';

// Every object Ferry builds, for every example document, as the real API server sees it: schema validation,
// defaulting and admission (a server-side dry run persists nothing). Pod Security admission enforces only on pods, not
// on Jobs or Deployments, so the pod templates are also dry-run as pods in a namespace that enforces "restricted".
const env = useNamespace('act-dry-run', RESTRICTED);

async function dryRunPod(name: string, template: V1PodTemplateSpec): Promise<void> {
  await env.core.createNamespacedPod({
    namespace: env.ns,
    dryRun: 'All',
    body: { metadata: { ...template.metadata, name }, spec: template.spec },
  });
}

describe.each(FIXTURE_NAMES)('fixture %s', (fixture) => {
  it('every object is accepted by a server-side apply dry run', async () => {
    const objects = fixtureObjectList(fixture, { namespace: env.ns });
    const admission = fixture === 'slo-admission' || fixture === 'inference-pool' ? ['ConfigMap'] : [];
    const pool = fixture === 'inference-pool' ? ['InferencePool'] : [];
    // The engine's own Service, the front's configuration and HAProxy, before the model's Service points at them.
    const front = fixture === 'front' ? ['Service', 'ConfigMap', 'Deployment'] : [];
    expect(objects.map((o) => o.kind)).toEqual([
      'ConfigMap',
      'PersistentVolumeClaim',
      'Job',
      ...admission,
      'Deployment',
      ...front,
      'Service',
      ...pool,
    ]);
    for (const obj of objects) {
      const applied = await env.cluster.apply<KubernetesObject>(obj, FIELD_MANAGER, { dryRun: true });
      expect(applied.metadata?.name).toBe(obj.metadata?.name);
      expect(applied.metadata?.labels).toEqual(obj.metadata?.labels);
    }
    // Nothing was persisted.
    const configMaps = await env.core.listNamespacedConfigMap({ namespace: env.ns, labelSelector: 'ferry.dev/model' });
    expect(configMaps.items).toEqual([]);
  });

  it('the puller and engine pods pass Pod Security "restricted"', async () => {
    const objects = fixtureObjects(fixture, { namespace: env.ns });
    await dryRunPod(`${fixture}-puller`, objects.pullerJob.spec!.template);
    await dryRunPod(`${fixture}-engine`, objects.deployment.spec!.template);
    if (objects.frontDeployment) await dryRunPod(`${fixture}-front`, objects.frontDeployment.spec!.template);
  });
});

// With FERRY_NETWORK_POLICY=on every fixture gets the gate sidecar and a NetworkPolicy: the same checks, and the
// policy's own validation (named ports, selectors) by the API server. Nothing here enforces a policy (docs/security.md).
describe.each(FIXTURE_NAMES)('fixture %s with a NetworkPolicy per model', (fixture) => {
  const gated = () =>
    buildAll(fixtureModel(fixture, { namespace: env.ns }), {
      rootUid: FIXTURE_ROOT_UID,
      networkPolicy: { namespace: 'ferry-system', podLabels: { 'app.kubernetes.io/name': 'ferry-worker' } },
    });

  it('every object, the policy and the gate among them, is accepted by a server-side apply dry run', async () => {
    const objects = objectList(gated());
    expect(objects.map((o) => o.kind)).toContain('NetworkPolicy');
    for (const obj of objects) {
      const applied = await env.cluster.apply<KubernetesObject>(obj, FIELD_MANAGER, { dryRun: true });
      expect(applied.metadata?.labels).toEqual(obj.metadata?.labels);
    }
    await dryRunPod(`${fixture}-gated`, gated().deployment.spec!.template);
  });
});

it('the NetworkPolicy dry run refuses a port the policy cannot name (the check has teeth)', async () => {
  const policy = structuredClone(gatedPolicy());
  policy.spec!.ingress![0]!.ports = [{ protocol: 'TCP', port: 'not a port name' }];
  await expect(env.cluster.apply(policy, FIELD_MANAGER, { dryRun: true })).rejects.toMatchObject({
    type: 'KubernetesRejected',
  });
});

function gatedPolicy() {
  return buildAll(fixtureModel('minimal-hf', { namespace: env.ns }), {
    rootUid: FIXTURE_ROOT_UID,
    networkPolicy: { namespace: 'ferry-system', podLabels: { app: 'ferry' } },
  }).networkPolicy!;
}

// The InferencePool is checked against the Gateway API Inference Extension's published CRDs (v1.5.0), which the
// local stack installs (deploy/local/install.sh, versions.env).
it('the InferencePool dry run refuses a pool the CRD does not allow (the check has teeth)', async () => {
  const { inferencePool } = fixtureObjects('inference-pool', { namespace: env.ns });
  const bad = structuredClone(inferencePool!);
  bad.spec.targetPorts = [{ number: 8080 }, { number: 8080 }];
  (bad.spec.endpointPickerRef as { failureMode: string }).failureMode = 'FailSometimes';
  const refused = env.cluster.apply(bad, FIELD_MANAGER, { dryRun: true });
  await expect(refused).rejects.toMatchObject({ type: 'KubernetesRejected' });
  await expect(refused).rejects.toThrow(/failureMode/);
});

it('the same pod dry run refuses a pod that violates "restricted" (the check has teeth)', async () => {
  const { pullerJob } = fixtureObjects('minimal-hf', { namespace: env.ns });
  const template = structuredClone(pullerJob.spec!.template);
  template.spec!.securityContext = { ...template.spec!.securityContext, runAsNonRoot: false, runAsUser: 0 };
  await expect(dryRunPod('root-puller', template)).rejects.toMatchObject({ code: 403 });
});
