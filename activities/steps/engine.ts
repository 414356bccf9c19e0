// applyEngine and scaleEngine: the vLLM Deployment and its Service, written by server-side apply under stable field
// managers, only over objects that carry this model's labels.
import type { V1Deployment, V1Pod, V1Service } from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import type { ApplicationFailure } from '@temporalio/common';
import {
  FAILURE,
  failure,
  type ModelInput,
  type ObjectsInput,
  type RevisionShare,
  type ScalingPolicy,
  type ServedModel,
  type Slot,
} from '../../workflows/contract/index.js';
import type { Cluster } from '../cluster/api.js';
import { childOptions, timingOf, type ActivityDeps } from '../deps.js';
import { waitFor } from '../cluster/wait.js';
import {
  admissionConfigMap,
  admissionConfigMapName,
  buildDeployment,
  buildInferencePool,
  buildNetworkPolicy,
  buildService,
  deploymentName,
  FIELD_MANAGER,
  frontedService,
  hasSidecar,
  INFERENCE_POOL_API_VERSION,
  INFERENCE_POOL_KIND,
  inferencePoolName,
  networkPolicyName,
  selectorLabels,
  serviceName,
  slotBase,
} from '../builders/index.js';
import { assertOurs, isOurs } from '../readers/ownership.js';
import { syncFront } from './front.js';
import { ProgressReporter } from '../cluster/progress.js';
import { engineWatches, labelSelectorOf } from '../cluster/model-reads.js';

/** The field manager of `scaleEngine`'s replica count; the next applyEngine (forced, under FIELD_MANAGER) takes it back. */
export const SCALE_FIELD_MANAGER = 'ferry-scale';

const deploymentRef = (model: ServedModel, slot?: Slot) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  name: deploymentName(slotBase(model.metadata.name, slot)),
  namespace: model.metadata.namespace,
});

const inferencePoolRef = (model: ServedModel) => ({
  apiVersion: INFERENCE_POOL_API_VERSION,
  kind: INFERENCE_POOL_KIND,
  name: inferencePoolName(model.metadata.name),
  namespace: model.metadata.namespace,
});

const networkPolicyRef = (model: ServedModel) => ({
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  name: networkPolicyName(model.metadata.name),
  namespace: model.metadata.namespace,
});

const serviceRef = (model: ServedModel) => ({
  apiVersion: 'v1',
  kind: 'Service',
  name: serviceName(model.metadata.name),
  namespace: model.metadata.namespace,
});

/**
 * Applies the Service and the Deployment (`replicas` overrides spec.replicas; 0 releases a ReadWriteOnce volume) and
 * returns the Deployment's generation, the revision awaitRollout waits for. Applying the same spec again changes
 * nothing (same generation and resourceVersion). An object of the same name without our labels is never taken over.
 * The engine objects are `slot`'s (docs/design/rollout.md, section 2); the model's own (its Service, front with
 * `shares`, pool, policy) are the model's whichever slot is applied.
 */
export async function applyEngine(
  deps: ActivityDeps,
  {
    model,
    rootUid,
    replicas,
    admissionLimit,
    scaling,
    shares,
    slot,
  }: ObjectsInput & { replicas?: number; admissionLimit?: number; scaling?: ScalingPolicy; shares?: RevisionShare[] },
): Promise<{ generation: number }> {
  const { cluster } = deps;
  const options = { ...childOptions(deps, rootUid), ...(shares ? { shares } : {}), ...(slot ? { slot } : {}) };
  const pool = buildInferencePool(model, options);
  const policy = buildNetworkPolicy(model, options);
  const [existingDeployment, existingService, existingPolicy, poolServed] = await Promise.all([
    cluster.get<V1Deployment>(deploymentRef(model, slot)),
    cluster.get<V1Service>(serviceRef(model)),
    policy ? cluster.get(networkPolicyRef(model)) : undefined,
    cluster.serves(INFERENCE_POOL_API_VERSION, INFERENCE_POOL_KIND),
  ]);
  assertOurs(model, existingDeployment);
  assertOurs(model, existingService);
  assertOurs(model, existingPolicy);
  // Before anything is written: a pool the cluster cannot hold fails the step with nothing half-applied.
  if (pool && !poolServed) throw inferenceExtensionMissing(model);
  // Before the engine's pods: none of them runs a moment without the policy.
  if (policy) await cluster.apply(policy, FIELD_MANAGER);
  // Before the Deployment: its pods mount the sidecar's configuration, and would not start without it.
  if (hasSidecar(model, options)) {
    await applyAdmission(deps, { model, rootUid, maxConcurrency: admissionLimit, ...(slot ? { slot } : {}) });
  }
  // A front is there before the model's Service points at it; one the spec no longer asks for goes once it points back.
  if (model.spec.front) await syncFront(deps, model, options);
  await cluster.apply(model.spec.front ? frontedService(model, options) : buildService(model, options), FIELD_MANAGER);
  if (!model.spec.front) await syncFront(deps, model, options);
  const applied = await cluster.apply(
    buildDeployment(model, { ...options, replicas, ...(scaling ? { scaling } : {}) }),
    FIELD_MANAGER,
  );
  if (poolServed) await syncInferencePool(deps, model, pool);
  const generation = applied.metadata?.generation;
  if (generation === undefined) {
    throw failure(
      FAILURE.KubernetesIncomplete,
      `the API server returned Deployment ${applied.metadata?.name} without a generation`,
    );
  }
  return { generation };
}

/** `spec.inferencePool` on a cluster without the Gateway API Inference Extension's CRD: not retryable, says the fix. */
export function inferenceExtensionMissing(model: ServedModel): ApplicationFailure {
  const { namespace, name } = inferencePoolRef(model);
  return failure(
    FAILURE.InferenceExtensionMissing,
    `spec.inferencePool asks for InferencePool ${namespace}/${name}, and the cluster does not serve ` +
      `${INFERENCE_POOL_KIND} ${INFERENCE_POOL_API_VERSION}: install the Gateway API Inference Extension's CRDs ` +
      '(v1.x), or remove spec.inferencePool',
  );
}

/**
 * The InferencePool of `spec.inferencePool`, applied after the Deployment whose pods it selects; one the spec no
 * longer asks for is deleted. Only on a cluster that serves the kind.
 */
async function syncInferencePool(
  deps: ActivityDeps,
  model: ServedModel,
  pool: ReturnType<typeof buildInferencePool>,
): Promise<void> {
  const { cluster } = deps;
  const ref = inferencePoolRef(model);
  const existing = await cluster.get(ref);
  if (pool) {
    assertOurs(model, existing);
    await cluster.apply(pool, FIELD_MANAGER);
  } else if (existing && isOurs(existing, model)) {
    await cluster.delete(ref, 'Background', { uid: existing.metadata?.uid });
  }
}

/**
 * Writes the admission sidecar's configuration for `maxConcurrency` (unset: no limit) by server-side apply; each
 * replica's nginx reloads it when the kubelet has updated the mounted file, so a new limit needs no rollout. Another's
 * ConfigMap of that name is never taken over.
 */
export async function applyAdmission(
  deps: ActivityDeps,
  { model, rootUid, maxConcurrency, slot }: ModelInput & { rootUid: string; maxConcurrency?: number },
): Promise<void> {
  const ref = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    name: admissionConfigMapName(slotBase(model.metadata.name, slot)),
    namespace: model.metadata.namespace,
  };
  assertOurs(model, await deps.cluster.get(ref));
  const options = { ...childOptions(deps, rootUid), ...(slot ? { slot } : {}) };
  await deps.cluster.apply(admissionConfigMap(model, maxConcurrency, options), FIELD_MANAGER);
}

/**
 * Sets the Deployment's replicas (under SCALE_FIELD_MANAGER, so nothing else of the spec changes); at 0 it waits,
 * heartbeating, until no engine pod remains, for a ReadWriteOnce volume is released only then. A missing Deployment
 * is fine at 0 (nothing runs) and a `KubernetesRejected` failure otherwise.
 */
export async function scaleEngine(
  deps: ActivityDeps,
  { model, replicas, slot }: ModelInput & { replicas: number },
): Promise<void> {
  const { cluster } = deps;
  const ref = deploymentRef(model, slot);
  const deployment = assertOurs(model, await cluster.get<V1Deployment>(ref));
  if (deployment) {
    await cluster.apply(
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: ref.name, namespace: ref.namespace },
        spec: { replicas },
      },
      SCALE_FIELD_MANAGER,
    );
  } else if (replicas > 0) {
    throw failure(
      FAILURE.KubernetesRejected,
      `cannot scale Deployment ${ref.namespace}/${ref.name} to ${replicas}: it does not exist`,
    );
  }
  if (replicas === 0) await waitForNoEnginePods(deps, model, slot);
}

/** Waits until no pod of the model's engine is left, terminating ones included. */
async function waitForNoEnginePods(deps: ActivityDeps, model: ServedModel, slot?: Slot): Promise<void> {
  const ctx = Context.current();
  const timing = timingOf(deps);
  const reporter = new ProgressReporter(deps.progress, timing.progressIntervalMs);
  await waitFor(deps.cluster, {
    signal: ctx.cancellationSignal,
    pollMs: timing.pollMs,
    watches: engineWatches(model, slot),
    check: async () => {
      const pods = await enginePods(deps.cluster, model, slot);
      if (pods.length === 0) return true;
      await reporter.report({
        step: 'release',
        state: 'TerminatingPods',
        message: `waiting for ${pods.length} engine pod(s) to be gone: ${pods.map((p) => p.metadata?.name).join(', ')}`,
      });
      return undefined;
    },
  });
}

function enginePods(cluster: Cluster, model: ServedModel, slot?: Slot): Promise<V1Pod[]> {
  return cluster.list<V1Pod>('v1', 'Pod', model.metadata.namespace, {
    labelSelector: labelSelectorOf(selectorLabels(slotBase(model.metadata.name, slot))),
  });
}
