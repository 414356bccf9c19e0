// Shared by the engine activity tests: a model's root and volume as the claim and storage steps would leave them.
import type { V1Pod } from '@kubernetes/client-node';
import { Cluster } from '../../activities/cluster/api.js';
import { buildPvc, buildRoot, FIELD_MANAGER, selectorLabels } from '../../activities/builders/index.js';
import type { ServedModel, StepProgress } from '../../workflows/contract/index.js';
import type { ActivityRun } from './activity-env.js';
import { adminKubeConfig, type Clients } from './kube.js';

/** Applies the model's root ConfigMap and its volume (bound by KWOK's provisioner); returns the root's uid. */
export async function prepareModel(model: ServedModel, cluster = new Cluster(adminKubeConfig())): Promise<string> {
  const root = await cluster.apply(buildRoot(model), FIELD_MANAGER);
  const rootUid = root.metadata!.uid!;
  await cluster.apply(buildPvc(model, { rootUid }), FIELD_MANAGER);
  return rootUid;
}

/** Resolves once a heartbeat satisfies `test`. */
export async function heartbeatWhere(
  run: ActivityRun<unknown>,
  test: (p: StepProgress) => boolean,
  timeoutMs = 30_000,
): Promise<StepProgress> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const hit = run.heartbeats.find(test);
    if (hit) return hit;
    if (Date.now() > end) {
      throw new Error(`no matching heartbeat in ${timeoutMs} ms; saw ${JSON.stringify(run.heartbeats.slice(-5))}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The model's engine pods (any revision). */
export async function enginePodsOf(c: Clients, model: ServedModel): Promise<V1Pod[]> {
  const labelSelector = Object.entries(selectorLabels(model.metadata.name))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  return (await c.core.listNamespacedPod({ namespace: model.metadata.namespace, labelSelector })).items;
}

/** The field manager of pod-template annotations that only the simulated kubelet (KWOK) reads. */
export const SIM_FIELD_MANAGER = 'ferry-test-sim';

/**
 * Gives the engine's pods a simulation annotation, e.g. `sim.ferry.dev/exit-code` (KWOK reads it before the label of
 * the same name). Written under its own field manager, so Ferry's applies keep it; it changes the pod template.
 */
export async function annotateEnginePods(cluster: Cluster, model: ServedModel, annotations: Record<string, string>) {
  await cluster.apply(
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: model.metadata.name, namespace: model.metadata.namespace },
      spec: { template: { metadata: { annotations } } },
    },
    SIM_FIELD_MANAGER,
  );
}

/** The LoRA adapters an engine (or its stand-in) at `url` lists on /v1/models (cards with a parent), sorted. */
export async function adaptersListed(url: string): Promise<string[]> {
  const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string; parent: string | null }[] };
  return models.data
    .filter((card) => card.parent)
    .map((card) => card.id)
    .sort();
}

/** A one-message chat completion sent to the engine at `url` for `model` (a served name or an adapter). */
export function chatCompletion(url: string, model: string, content = 'select 1'): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content }] }),
  });
}
