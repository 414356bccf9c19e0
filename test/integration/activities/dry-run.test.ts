// dryRunModel against the local control plane: the worker's checks and the API server's dry-run apply of every
// object, with nothing left behind; refusals (a missing namespace, a name someone else holds, a document the parser
// refuses) are answers, not failures.
import { describe, expect, it } from 'vitest';
import { createActivities } from '../../../activities/create-activities.js';
import type { DryRunResult } from '../../../workflows/contract/index.js';
import { activity } from '../../support/activity-env.js';
import { RESTRICTED, useActivityEnv } from '../../support/fixtures.js';

const env = useActivityEnv('act-dry-run-model', { labels: RESTRICTED });

const document = (name: string, namespace = env.ns) => ({
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name, namespace },
  spec: {
    cluster: 'test',
    source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', tokenSecret: { name: 'hf-token', key: 'token' } } },
  },
});

const kindNames = (result: DryRunResult) => result.objects.map((o) => `${o.kind}/${o.name}`);

/** Everything with Ferry's labels in the namespace: what a dry run must not leave. */
async function ferryObjects(namespace: string): Promise<string[]> {
  const labelSelector = 'app.kubernetes.io/managed-by=ferry';
  const lists = await Promise.all([
    env.core.listNamespacedConfigMap({ namespace, labelSelector }),
    env.core.listNamespacedPersistentVolumeClaim({ namespace, labelSelector }),
    env.core.listNamespacedService({ namespace, labelSelector }),
    env.batch.listNamespacedJob({ namespace, labelSelector }),
    env.apps.listNamespacedDeployment({ namespace, labelSelector }),
  ]);
  return lists.flatMap((list) => list.items.map((o) => o.metadata!.name!));
}

describe('dryRunModel', () => {
  it('answers every object as the API server would persist it, and creates nothing', async () => {
    const result = await activity(env.acts.dryRunModel, { document: document('qwen') });
    expect(result.issues).toEqual([]);
    expect(kindNames(result)).toEqual([
      'ConfigMap/qwen-ferry',
      'PersistentVolumeClaim/qwen-weights',
      expect.stringMatching(/^Job\/qwen-pull-[0-9a-f]{8}$/),
      'Deployment/qwen',
      'Service/qwen',
    ]);
    for (const { object, refusal } of result.objects) {
      expect(refusal).toBeUndefined();
      // The API server's answer: its uid and defaults, without the field managers' bookkeeping.
      const metadata = object!.metadata as Record<string, unknown>;
      expect(metadata).toMatchObject({ namespace: env.ns, uid: expect.any(String) });
      expect(metadata).not.toHaveProperty('managedFields');
    }
    const deployment = result.objects.find((o) => o.kind === 'Deployment')!.object as {
      metadata: { ownerReferences: { name: string; uid: string }[] };
      spec: { revisionHistoryLimit: number; template: { spec: { dnsPolicy: string } } };
    };
    // Defaults only the API server fills in; the owner is the root to be created.
    expect(deployment.spec.revisionHistoryLimit).toBe(10);
    expect(deployment.spec.template.spec.dnsPolicy).toBe('ClusterFirst');
    expect(deployment.metadata.ownerReferences).toEqual([
      expect.objectContaining({ name: 'qwen-ferry', uid: 'root-configmap-uid-given-at-creation' }),
    ]);
    // The token is named, never read: nothing of a Secret is in the answer but its name.
    expect(JSON.stringify(result)).toContain('"hf-token"');
    expect(await ferryObjects(env.ns)).toEqual([]);
  });

  it('builds with the worker’s own settings: its NetworkPolicy', async () => {
    const acts = createActivities({
      ...env.deps,
      networkPolicy: { namespace: 'ferry-system', podLabels: { 'app.kubernetes.io/name': 'ferry-worker' } },
    });
    const result = await activity(acts.dryRunModel, { document: document('gated') });
    expect(kindNames(result)).toContain('NetworkPolicy/gated');
    expect(result.objects.filter((o) => o.refusal)).toEqual([]);
  });

  it('refuses every object in a namespace that does not exist, naming it', async () => {
    const result = await activity(env.acts.dryRunModel, { document: document('qwen', `${env.ns}-absent`) });
    expect(result.objects).toHaveLength(5);
    for (const o of result.objects) {
      expect(o.object).toBeUndefined();
      expect(o.refusal).toMatch(new RegExp(`namespaces "${env.ns}-absent" not found`));
    }
  });

  it('refuses the object whose name someone else holds, as the claim would, and leaves it untouched', async () => {
    await env.core.createNamespacedConfigMap({
      namespace: env.ns,
      body: { metadata: { name: 'taken-ferry' }, data: { mine: 'yes' } },
    });
    const result = await activity(env.acts.dryRunModel, { document: document('taken') });
    const [root, ...children] = result.objects;
    expect(root).toEqual({
      kind: 'ConfigMap',
      name: 'taken-ferry',
      refusal: expect.stringMatching(/ConfigMap .*\/taken-ferry already exists \(.*without Ferry's labels\)/),
    });
    expect(children.every((o) => o.object && !o.refusal)).toBe(true);
    const kept = await env.core.readNamespacedConfigMap({ namespace: env.ns, name: 'taken-ferry' });
    expect(kept.data).toEqual({ mine: 'yes' });
  });

  it('returns the parser’s issues for a document it refuses, and checks nothing else', async () => {
    const bad = document('Bad_Name');
    (bad.spec as Record<string, unknown>).replicas = -1;
    const result = await activity(env.acts.dryRunModel, { document: bad });
    expect(result.objects).toEqual([]);
    expect(result.issues.map((i) => i.path)).toEqual(expect.arrayContaining(['metadata.name', 'spec.replicas']));
  });
});
