import { beforeAll, describe, expect, it } from 'vitest';
import { Watch, type V1Pod } from '@kubernetes/client-node';
import { pvcName, sourceHash8 } from '../../../activities/builders/index.js';
import { type ModelStatus, parseServedModel } from '../../../workflows/contract/index.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import type { Doc } from '../../support/workflow-harness.js';
import {
  expectOk,
  ferryJson,
  getOnce,
  localUrls,
  modelObjects,
  simulatedModelDoc,
  uniqueCluster,
} from '../../support/e2e.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

// The whole path, through the CLI, a real worker process with the real activities, the real control plane (KWOK
// nodes) and the vLLM stand-in that the local supervisor starts for each simulated engine pod.
const kube = useNamespace('e2e', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('e2e');

beforeAll(async () => {
  await startWorkerProcess(cluster);
}, 180_000);

// The stand-in "loads" for 1 s; the simulated download takes 2 s.
const modelDoc = (name: string, patch?: (d: Doc) => void): Doc =>
  simulatedModelDoc(kube.ns, cluster, name, '2s', patch);

const ref = (name: string) => [name, '-n', kube.ns, '--cluster', cluster];
const status = (name: string) => ferryJson<ModelStatus>(['status', ...ref(name)]);
const downloads = (s: ModelStatus) => s.timeline.filter((t) => t.step === 'download');

/**
 * Records the model's pods coming and going, and the moments when an engine pod and a puller pod would have
 * existed together: the ReadWriteOnce hand-off that must never happen (a Multi-Attach on a real cluster).
 */
async function watchHandOff(name: string) {
  const live = new Map<string, string>();
  const overlaps: string[] = [];
  const seen: string[] = [];
  const abort = await new Watch(kube.kc).watch(
    `/api/v1/namespaces/${kube.ns}/pods`,
    { labelSelector: `ferry.dev/model=${name}` },
    (type: string, pod: V1Pod) => {
      const uid = pod.metadata!.uid!;
      const component = pod.metadata?.labels?.['app.kubernetes.io/component'] ?? '?';
      if (type === 'ADDED') {
        const other = component === 'engine' ? 'puller' : 'engine';
        if ([...live.values()].includes(other))
          overlaps.push(`${component} ${pod.metadata?.name} created while a ${other} pod existed`);
        live.set(uid, component);
        seen.push(component);
      } else if (type === 'DELETED') {
        live.delete(uid);
      }
    },
    () => undefined,
  );
  return { overlaps, seen, stop: () => abort.abort() };
}

describe('ferry end to end', { timeout: 360_000 }, () => {
  it('serve → Ready → completion → in-place apply → new-source update → delete leaves nothing', async () => {
    const doc = modelDoc('chat');
    const handOff = await watchHandOff('chat');
    expectOk(await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '4m']), 'ferry serve');

    const ready = await status('chat');
    expect(ready.phase).toBe('Ready');
    expect(ready.generation).toBe(1);
    expect(ready.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(downloads(ready).map((t) => t.outcome)).toEqual(['Succeeded']);

    const completion = await fetch(`${ready.endpoint}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat', prompt: 'ferry across the river', max_tokens: 8 }),
    });
    expect(completion.status).toBe(200);
    expect(((await completion.json()) as { choices: { text: string }[] }).choices[0]!.text).toContain(
      'ferry engine-sim',
    );

    // In place, through `ferry apply` (serve-or-update): an env change rolls a new revision and pulls nothing.
    doc.spec.engine.env = [{ name: 'VLLM_LOGGING_LEVEL', value: 'DEBUG' }];
    const applied = await runFerry(['apply', '-f', writeDoc(doc), '--wait', '--timeout', '4m']);
    expectOk(applied, 'ferry apply (in place)');
    expect(applied.stdout).toMatch(/^applied to .*\/chat: generation 2: spec\.engine\.env changed$/m);
    const inPlace = await status('chat');
    expect(inPlace).toMatchObject({ phase: 'Ready', generation: 2, observedGeneration: 2 });
    expect(downloads(inPlace)).toHaveLength(1);
    const dep = await kube.apps.readNamespacedDeployment({ name: 'chat', namespace: kube.ns });
    expect(dep.spec?.template.spec?.containers[0]?.env).toContainEqual({ name: 'VLLM_LOGGING_LEVEL', value: 'DEBUG' });
    expect((await kube.batch.listNamespacedJob({ namespace: kube.ns })).items).toHaveLength(0);

    // New source: the engine is scaled to 0, the new revision pulled, the volume released, the engine rolled out.
    doc.spec.source.huggingface.revision = 'v2';
    expectOk(await runFerry(['update', '-f', writeDoc(doc), '--wait', '--timeout', '4m']), 'ferry update (new source)');
    const moved = await status('chat');
    expect(moved).toMatchObject({ phase: 'Ready', generation: 3, observedGeneration: 3 });
    expect(downloads(moved).map((t) => t.outcome)).toEqual(['Succeeded', 'Succeeded']);
    const hash8 = sourceHash8(parseServedModel(doc).spec.source);
    const after = await kube.apps.readNamespacedDeployment({ name: 'chat', namespace: kube.ns });
    expect(after.spec?.template.spec?.containers[0]?.args?.join(' ')).toContain(`--model /models/${hash8}`);
    const pvc = await kube.core.readNamespacedPersistentVolumeClaim({ name: pvcName('chat'), namespace: kube.ns });
    expect(pvc.metadata?.annotations?.['ferry.dev/weights-source-hash']?.slice(0, 8)).toBe(hash8);

    // Puller then engine at start, a new engine in place, then puller and engine again for the new source,
    // never an engine pod and a puller pod at once.
    handOff.stop();
    expect(handOff.seen).toEqual(['puller', 'engine', 'engine', 'puller', 'engine']);
    expect(handOff.overlaps).toEqual([]);

    expectOk(await runFerry(['delete', ...ref('chat'), '--wait']), 'ferry delete');
    await waitFor(
      'every object of the model to be gone',
      60_000,
      async () => (await modelObjects(kube, kube.ns, 'chat')).length === 0,
    );
  });

  it('serves a checkpoint already on a volume, and leaves that volume alone', async () => {
    await kube.core.createNamespacedPersistentVolumeClaim({
      namespace: kube.ns,
      body: {
        metadata: { name: 'checkpoints' },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '5Gi' } } },
      },
    });
    const doc = modelDoc(
      'ckpt',
      (d) => (d.spec.source = { pvc: { claimName: 'checkpoints', path: 'run-42/step-1000' } }),
    );
    expectOk(await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '4m']), 'ferry serve');
    const s = await status('ckpt');
    expect(s.phase).toBe('Ready');
    expect(s.source).toBe('pvc:checkpoints/run-42/step-1000');
    // The checkpoint's claim is someone else's: Ferry read it and left it alone.
    const source = await kube.core.readNamespacedPersistentVolumeClaim({ name: 'checkpoints', namespace: kube.ns });
    expect(source.metadata?.labels?.['app.kubernetes.io/managed-by']).toBeUndefined();
    expectOk(await runFerry(['delete', ...ref('ckpt'), '--wait']), 'ferry delete');
    await waitFor(
      'every object of the model to be gone',
      60_000,
      async () => (await modelObjects(kube, kube.ns, 'ckpt')).length === 0,
    );
    expect(
      (await kube.core.readNamespacedPersistentVolumeClaim({ name: 'checkpoints', namespace: kube.ns })).metadata
        ?.deletionTimestamp,
    ).toBeUndefined();
  });

  it('a front: Ready with the Service on it, each answer naming its revision; applied away, the Service goes back, the same endpoint; delete leaves nothing', async () => {
    const selector = async (name: string) =>
      (await kube.core.readNamespacedService({ name, namespace: kube.ns })).spec?.selector?.[
        'app.kubernetes.io/component'
      ];
    const plain = modelDoc('held');
    const doc = modelDoc('held', (d) => (d.spec.front = { holdFor: '2m' }));
    expectOk(await runFerry(['serve', '-f', writeDoc(doc), '--wait', '--timeout', '4m']), 'ferry serve');
    const served = await status('held');
    expect(served.phase).toBe('Ready');
    expect(await selector('held')).toBe('front');
    expect(await selector('held-engine')).toBe('engine');
    expect(await modelObjects(kube, kube.ns, 'held')).toEqual(
      expect.arrayContaining(['Deployment/held-front', 'ConfigMap/held-front', 'Service/held-engine']),
    );
    // Every response through the front names the revision that answered (the supervisor plays the front's pods).
    expect(served.revision).toBe('r1');
    const answeredBy = async () => {
      const url = localUrls()[`${kube.ns}/held`];
      const res = url ? await getOnce(`${url}/v1/models`).catch(() => undefined) : undefined;
      return res?.status === 200 ? res.headers['x-ferry-revision'] : undefined;
    };
    await waitFor('an answer through the front from r1', 60_000, async () => (await answeredBy()) === 'r1');
    // New engine pods are the next revision; the front names it once it has rolled.
    const env = [{ name: 'FERRY_SIM_TOKEN_DELAY_MS', value: '5' }];
    const next = modelDoc(
      'held',
      (d) => ((d.spec.front = { holdFor: '2m' }), (d.spec.engine = { ...d.spec.engine, env })),
    );
    expectOk(await runFerry(['apply', '-f', writeDoc(next), '--wait', '--timeout', '3m']), 'ferry apply');
    expect(await status('held')).toMatchObject({ phase: 'Ready', generation: 2, revision: 'r2' });
    await waitFor('an answer through the front from r2', 60_000, async () => (await answeredBy()) === 'r2');

    expectOk(await runFerry(['apply', '-f', writeDoc(plain), '--wait', '--timeout', '2m']), 'ferry apply');
    const applied = await status('held');
    expect(applied).toMatchObject({ phase: 'Ready', generation: 3, endpoint: served.endpoint, revision: 'r3' });
    expect(await selector('held')).toBe('engine');
    await waitFor('the front gone', 60_000, async () => {
      const left = await modelObjects(kube, kube.ns, 'held');
      return !left.some((o) => o.includes('held-front') || o.includes('held-engine'));
    });

    expectOk(await runFerry(['apply', '-f', writeDoc(doc), '--wait', '--timeout', '2m']), 'ferry apply');
    expectOk(await runFerry(['delete', ...ref('held'), '--wait']), 'ferry delete');
    await waitFor(
      'every object of the model to be gone',
      60_000,
      async () => (await modelObjects(kube, kube.ns, 'held')).length === 0,
    );
  });

  it('a retained volume outlives the model and spares the next serve of that name its download', async () => {
    const doc = modelDoc('kept', (d) => (d.spec.storage = { retainOnDelete: true, size: '20Gi' }));
    const file = writeDoc(doc);
    expectOk(await runFerry(['serve', '-f', file, '--wait', '--timeout', '4m']), 'ferry serve');
    expectOk(await runFerry(['delete', ...ref('kept'), '--wait']), 'ferry delete');

    const left = await waitFor('only the retained PVC to remain', 60_000, async () => {
      const objects = await modelObjects(kube, kube.ns, 'kept');
      return objects.length === 1 ? objects : undefined;
    });
    expect(left).toEqual([`PersistentVolumeClaim/${pvcName('kept')}`]);
    const pvc = await kube.core.readNamespacedPersistentVolumeClaim({ name: pvcName('kept'), namespace: kube.ns });
    expect(pvc.metadata?.ownerReferences ?? []).toEqual([]);
    expect(pvc.metadata?.labels?.['app.kubernetes.io/managed-by']).toBe('ferry');

    expectOk(await runFerry(['serve', '-f', file, '--wait', '--timeout', '4m']), 'ferry serve (again)');
    const again = await status('kept');
    expect(again.phase).toBe('Ready');
    expect(downloads(again).map((t) => t.outcome)).toEqual(['Skipped']);
    expectOk(await runFerry(['delete', ...ref('kept'), '--wait']), 'ferry delete (again)');
  });
});
