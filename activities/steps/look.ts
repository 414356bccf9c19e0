// lookAtModel: a look at a Ready (or Degraded) model that reconciles, not only observes. It reads the spec itself (the
// input is a reference), reads the objects from the worker's watch where it can, puts back what drifted — a deleted
// or edited Service, a deleted Deployment or one whose spec someone changed (scaled by hand), a deleted or edited
// admission ConfigMap (with the limit in force), InferencePool or NetworkPolicy, labels, annotations or data Ferry sets
// on the root object, the Deployment or the Service, an engine without the gate the worker's NetworkPolicy setting
// asks for (or with one it no longer does) — by server-side apply under Ferry's field manager, and reports the engine
// as readStatus does. A root object or weights volume that is gone or going is
// reported as lost: only the whole sequence (claim, storage, pull) brings those back.
import type {
  KubernetesObject,
  V1ConfigMap,
  V1Deployment,
  V1NetworkPolicy,
  V1PersistentVolumeClaim,
  V1Service,
} from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import { FAILURE, failure, type LookInput, type LookResult, type ServedModel } from '../../workflows/contract/index.js';
import { childOptions, webUiLinkOf, type ActivityDeps } from '../deps.js';
import {
  ADMISSION_CONTAINER,
  admissionConfigMap,
  buildDeployment,
  buildFront,
  buildInferencePool,
  buildNetworkPolicy,
  buildRoot,
  buildService,
  canonicalJson,
  deploymentName,
  FIELD_MANAGER,
  FRONT_CONFIG_HASH,
  frontedService,
  hasSidecar,
  INFERENCE_POOL_API_VERSION,
  INFERENCE_POOL_KIND,
  type InferencePool,
  weightsClaim,
  rootName,
  serviceName,
  slotBase,
} from '../builders/index.js';
import type { ObjectRef } from '../cluster/api.js';
import { cachedReads, readEngine } from '../cluster/model-reads.js';
import { assertOurs } from '../readers/ownership.js';
import type { ApiKeyResolver } from './health.js';
import { isPodReady } from '../readers/revision.js';
import { incarnation } from './adapters.js';
import { observeEngine } from './read-status.js';
import { SCALE_FIELD_MANAGER } from './engine.js';
import { frontRefs } from './front.js';

/** The longest wait a look accepts before it looks (the workflow asks for about a second). */
const MAX_DELAY_MS = 60_000;

export async function lookAtModel(deps: ActivityDeps, input: LookInput, apiKeys?: ApiKeyResolver): Promise<LookResult> {
  if (!deps.specs) {
    throw failure(FAILURE.InvalidInput, 'this worker cannot read specs: lookAtModel needs a Temporal client');
  }
  // A look woken right after another keeps its distance here, in the activity, so the workflow needs no timer for it
  // (a cancellation ends the wait: the look is not needed any more).
  if (input.delayMs && input.delayMs > 0) await Context.current().sleep(Math.min(input.delayMs, MAX_DELAY_MS));
  // A model with spec.scaling runs the count its autoscaler set: that is what a look puts back.
  const spec = await deps.specs(input.ref, input.generation);
  const model = input.replicas === undefined ? spec : { ...spec, spec: { ...spec.spec, replicas: input.replicas } };
  const ns = model.metadata.namespace;
  deps.watcher?.watchNamespace(ns);
  const reads = cachedReads(deps.cluster, deps.watcher);
  // A grant narrowed since the model was accepted: nothing is put back or rebuilt, and the model says why (Degraded).
  const refusal = input.tenant !== undefined ? await deps.grants?.(input.tenant, model) : undefined;
  if (refusal) {
    const observed = await observeEngine(deps, reads, model, apiKeys);
    const message = `${refusal}: nothing is repaired until the grant or the model changes`;
    return { ...observed, problem: { reason: FAILURE.Forbidden, message }, repaired: [] };
  }
  const ref = (apiVersion: string, kind: string, name: string) => ({ apiVersion, kind, name, namespace: ns });
  // The watch selects Ferry's objects by label: one whose labels someone edited away looks deleted there, so an
  // object missing from memory is asked of the API server before anything is re-created or rebuilt.
  const read = async <T extends KubernetesObject>(r: ObjectRef): Promise<T | undefined> =>
    (await reads.get<T>(r)) ?? (reads === deps.cluster ? undefined : await deps.cluster.get<T>(r));
  /** Ours by its labels, or by its owner reference to the model's root (labels edited away): repaired, not refused. */
  const ours = <T extends KubernetesObject>(obj: T | undefined): T | undefined => {
    const owned = obj?.metadata?.ownerReferences?.some((o) => o.uid === input.rootUid);
    return owned ? obj : assertOurs(model, obj);
  };

  // The engine objects are those of the slot the current revision is in (docs/design/rollout.md, section 2).
  const { slot } = input;
  const base = slotBase(model.metadata.name, slot);
  const [root, pvc] = await Promise.all([
    read<V1ConfigMap>(ref('v1', 'ConfigMap', rootName(model.metadata.name))),
    read<V1PersistentVolumeClaim>(ref('v1', 'PersistentVolumeClaim', weightsClaim(model, slot))),
  ]);
  const lost = lostObject(model, input, root, pvc, weightsClaim(model, slot));
  if (lost) return { replicas: model.spec.replicas, readyReplicas: 0, repaired: [], lost };

  const repaired: string[] = [];
  const desiredRoot = buildRoot(model, webUiLinkOf(deps, model));
  const rootDrift = metadataDrift(root!, desiredRoot);
  if (dataDiffers(root!.data, desiredRoot.data)) rootDrift.push('data');
  if (rootDrift.length) {
    await deps.cluster.apply(desiredRoot, FIELD_MANAGER);
    repaired.push(`ConfigMap/${desiredRoot.metadata!.name} edited (${rootDrift.join(', ')}); re-applied`);
  }

  const [deployment, service] = await Promise.all([
    read<V1Deployment>(ref('apps/v1', 'Deployment', deploymentName(base))).then(ours),
    read<V1Service>(ref('v1', 'Service', serviceName(model.metadata.name))).then(ours),
  ]);
  const options = {
    ...childOptions(deps, input.rootUid),
    ...(input.scaling ? { scaling: input.scaling } : {}),
    ...(input.shares ? { shares: input.shares } : {}),
    ...(slot ? { slot } : {}),
  };
  const desiredService = model.spec.front ? frontedService(model, options) : buildService(model, options);
  const serviceMeta = service ? metadataDrift(service, desiredService) : [];
  const serviceDrift = service
    ? (serviceDrifted(service, desiredService) ?? (serviceMeta.length ? `${serviceMeta.join(', ')} edited` : undefined))
    : 'deleted';
  if (serviceDrift) {
    await deps.cluster.apply(desiredService, FIELD_MANAGER);
    repaired.push(`Service/${desiredService.metadata!.name} ${serviceDrift}; re-applied`);
  }
  /** Re-applies `desired` when `live` is gone, `edited` says how its content drifted, or Ferry's metadata did. */
  const putBack = async <T extends KubernetesObject>(
    live: T | undefined,
    desired: T,
    edited: (live: T) => string | undefined,
  ): Promise<void> => {
    const meta = live ? metadataDrift(live, desired) : [];
    const drift = !live ? 'deleted' : (edited(live) ?? (meta.length ? `edited (${meta.join(', ')})` : undefined));
    if (!drift) return;
    await deps.cluster.apply(desired, FIELD_MANAGER);
    repaired.push(`${desired.kind}/${desired.metadata!.name} ${drift}; re-applied`);
  };
  // Who may reach the engine, the sidecar's configuration and the pool: what guards the Deployment's pods, what they
  // mount, and what routes to them.
  const desiredPolicy = buildNetworkPolicy(model, options);
  if (desiredPolicy) {
    const live = await read<V1NetworkPolicy>(
      ref('networking.k8s.io/v1', 'NetworkPolicy', desiredPolicy.metadata!.name!),
    ).then(ours);
    await putBack(live, desiredPolicy, (l) => (policyDrifted(l, desiredPolicy) ? 'edited (spec)' : undefined));
  }
  const sidecar = hasSidecar(model, options);
  if (sidecar) {
    const desired = admissionConfigMap(model, input.admissionLimit, options);
    const live = await read<V1ConfigMap>(ref('v1', 'ConfigMap', desired.metadata!.name!)).then(ours);
    await putBack(live, desired, (l) => (dataDiffers(l.data, desired.data) ? 'edited (data)' : undefined));
  }
  const desiredPool = buildInferencePool(model, options);
  if (desiredPool) {
    const live = await read<InferencePool>(
      ref(INFERENCE_POOL_API_VERSION, INFERENCE_POOL_KIND, desiredPool.metadata.name!),
    ).then(ours);
    await putBack(live, desiredPool, (l) => (poolDrifted(l, desiredPool) ? 'edited (spec)' : undefined));
  }
  // The front: the engine's own Service, the configuration, HAProxy (one the spec dropped goes with applyEngine).
  const front = buildFront(model, options);
  if (front.engineService) {
    const [serviceRef, configRef, haproxyRef] = frontRefs(model, slot);
    const [engineService, config, haproxy] = await Promise.all([
      read<V1Service>(serviceRef).then(ours),
      read<V1ConfigMap>(configRef).then(ours),
      read<V1Deployment>(haproxyRef).then(ours),
    ]);
    await putBack(engineService, front.engineService, (l) => serviceDrifted(l, front.engineService));
    await putBack(config, front.frontConfig, (l) =>
      dataDiffers(l.data, front.frontConfig.data) ? 'edited (data)' : undefined,
    );
    await putBack(haproxy, front.frontDeployment, (l) =>
      frontDrifted(l, front.frontDeployment) ? 'edited (spec)' : undefined,
    );
  }
  let engineGeneration = deployment?.metadata?.generation;
  const desiredDeployment = buildDeployment(model, options);
  const deploymentMeta = deployment ? metadataDrift(deployment, desiredDeployment) : [];
  // The worker's NetworkPolicy setting changed since the engine was applied: the gate comes (or goes) by a rollout.
  const gateDrift =
    deployment && sidecar !== deployment.spec?.template?.spec?.containers?.some((c) => c.name === ADMISSION_CONTAINER)
      ? sidecar
        ? 'has no gate sidecar (FERRY_NETWORK_POLICY=on); re-applied with one'
        : 'has a gate sidecar the worker no longer asks for (FERRY_NETWORK_POLICY is off); re-applied without'
      : undefined;
  if (!deployment || engineGeneration !== input.engineGeneration || deploymentMeta.length || gateDrift) {
    // Forced apply under Ferry's field manager: fields someone else took over (a `kubectl scale`, an edited image,
    // a label) come back; fields Ferry never sets stay as they are, and an unchanged spec is not written at all.
    const applied = await deps.cluster.apply(desiredDeployment, FIELD_MANAGER);
    const name = applied.metadata?.name ?? deploymentName(base);
    if (!deployment) repaired.push(`Deployment/${name} deleted; re-created`);
    else if (gateDrift) repaired.push(`Deployment/${name} ${gateDrift}`);
    else if (applied.metadata?.generation !== engineGeneration) repaired.push(deploymentDrift(deployment, model));
    if (deployment && deploymentMeta.length)
      repaired.push(`Deployment/${name} ${deploymentMeta.join(', ')} edited; re-applied`);
    engineGeneration = applied.metadata?.generation;
  }
  // After a repair the watch's memory lags behind what was just written: ask the API server.
  const current = repaired.length ? deps.cluster : reads;
  const observed = await observeEngine(deps, current, model, apiKeys, slot);
  // A model that lists adapters: which engines hold them is the workflow's to compare (a new one holds none).
  const incarnations =
    model.spec.engine.lora.adapters !== undefined
      ? (await readEngine(current, model, slot)).currentPods.filter(isPodReady).map(incarnation).sort()
      : undefined;
  return {
    ...observed,
    repaired,
    ...(engineGeneration !== undefined ? { engineGeneration } : {}),
    ...(incarnations ? { incarnations } : {}),
  };
}

/** Which of `labels` and `annotations` Ferry sets on `desired` are missing or different on `live`. */
function metadataDrift(live: KubernetesObject, desired: KubernetesObject): string[] {
  const drifted = (field: 'labels' | 'annotations') =>
    Object.entries(desired.metadata?.[field] ?? {}).some(([k, v]) => live.metadata?.[field]?.[k] !== v);
  return (['labels', 'annotations'] as const).filter(drifted);
}

/** Whether a key Ferry writes in the root's data is missing or different (keys others add are theirs). */
function dataDiffers(live: Record<string, string> | undefined, desired: Record<string, string> | undefined): boolean {
  return Object.entries(desired ?? {}).some(([k, v]) => live?.[k] !== v);
}

/** The root object or the weights volume, when it is gone or going: everything else hangs on them. */
function lostObject(
  model: ServedModel,
  input: LookInput,
  root: V1ConfigMap | undefined,
  pvc: V1PersistentVolumeClaim | undefined,
  pvcObject: string,
): LookResult['lost'] {
  const ns = model.metadata.namespace;
  const rootObject = `ConfigMap/${rootName(model.metadata.name)}`;
  if (!root || root.metadata?.deletionTimestamp || root.metadata?.uid !== input.rootUid) {
    const what = !root ? 'was deleted' : root.metadata?.deletionTimestamp ? 'is being deleted' : 'was replaced';
    return {
      object: rootObject,
      reason: 'RootMissing',
      message: `the model's root object ${ns}/${rootName(model.metadata.name)} ${what}; its objects go with it and are made again`,
    };
  }
  const claim = `${ns}/${pvcObject}`;
  if (!pvc) {
    return {
      object: `PersistentVolumeClaim/${pvcObject}`,
      reason: 'VolumeMissing',
      message: `the weights volume ${claim} was deleted; it is provisioned and filled again`,
    };
  }
  if (pvc.metadata?.deletionTimestamp) {
    return {
      object: `PersistentVolumeClaim/${pvcObject}`,
      reason: 'VolumeTerminating',
      message: `the weights volume ${claim} is being deleted (it stays until the engine lets go); it is provisioned and filled again`,
    };
  }
  return undefined;
}

/** Whether the pool's selector, ports or picker differ from what Ferry sets (defaults the server fills in match). */
function poolDrifted(live: InferencePool, desired: InferencePool): boolean {
  const sorted = (m: Record<string, string> | undefined) => JSON.stringify(Object.entries(m ?? {}).sort());
  const want = desired.spec;
  const have: Partial<InferencePool['spec']> = live.spec ?? {};
  const picker = (p: Partial<InferencePool['spec']['endpointPickerRef']> | undefined) =>
    JSON.stringify([p?.name, p?.port?.number, p?.kind ?? 'Service', p?.group ?? '', p?.failureMode ?? 'FailClose']);
  return (
    sorted(want.selector.matchLabels) !== sorted(have.selector?.matchLabels) ||
    JSON.stringify(want.targetPorts.map((p) => p.number)) !==
      JSON.stringify((have.targetPorts ?? []).map((p) => p.number)) ||
    picker(want.endpointPickerRef) !== picker(have.endpointPickerRef)
  );
}

/**
 * Whether the policy's selector, types or rules differ from what Ferry sets. A rule's peers are `_from` as the client
 * library reads an object and `from` as the watch keeps it (raw JSON): both are read.
 */
function policyDrifted(live: V1NetworkPolicy, desired: V1NetworkPolicy): boolean {
  const rules = (p: V1NetworkPolicy) =>
    (p.spec?.ingress ?? []).map((rule) => ({
      from: rule._from ?? (rule as { from?: unknown }).from,
      ports: rule.ports?.map((port) => ({ protocol: port.protocol ?? 'TCP', port: port.port })),
    }));
  const shape = (p: V1NetworkPolicy) =>
    canonicalJson([
      p.spec?.podSelector?.matchLabels,
      p.spec?.podSelector?.matchExpressions ?? [],
      p.spec?.policyTypes ?? ['Ingress'],
      rules(p),
    ]);
  return shape(live) !== shape(desired);
}

/** Whether the front's count, image or configuration (by its hash on the pod template) differ from Ferry's. */
function frontDrifted(live: V1Deployment, desired: V1Deployment): boolean {
  const shape = (d: V1Deployment) =>
    canonicalJson([
      d.spec?.replicas,
      d.spec?.template?.metadata?.annotations?.[FRONT_CONFIG_HASH],
      d.spec?.template?.spec?.containers?.[0]?.image,
    ]);
  return shape(live) !== shape(desired);
}

/** What differs in the Service's fields Ferry sets, in words; undefined when nothing does. */
function serviceDrifted(live: V1Service, desired: V1Service): string | undefined {
  const want = desired.spec!;
  const have = live.spec ?? {};
  const sorted = (m: Record<string, string> | undefined) => JSON.stringify(Object.entries(m ?? {}).sort());
  const selector = sorted(want.selector) !== sorted(have.selector);
  const ports = (p: V1Service['spec']) =>
    JSON.stringify((p?.ports ?? []).map((x) => [x.name ?? '', x.port, String(x.targetPort ?? x.port)]));
  const portsDiffer = ports(want) !== ports(have);
  if (!selector && !portsDiffer) return undefined;
  return `edited (${[selector && 'selector', portsDiffer && 'ports'].filter(Boolean).join(', ')})`;
}

/** What someone did to the Deployment's spec, in words: scaled it, or edited it (by whom, from managedFields). */
function deploymentDrift(live: V1Deployment, model: ServedModel): string {
  const name = live.metadata?.name;
  const who = [
    ...new Set(
      (live.metadata?.managedFields ?? [])
        .map((f) => f.manager)
        .filter(
          (m): m is string =>
            !!m && m !== FIELD_MANAGER && m !== SCALE_FIELD_MANAGER && m !== 'kube-controller-manager',
        ),
    ),
  ];
  const by = who.length ? ` by ${who.join(', ')}` : '';
  if (live.spec?.replicas !== undefined && live.spec.replicas !== model.spec.replicas) {
    return `Deployment/${name} scaled to ${live.spec.replicas}${by}; back to ${model.spec.replicas}`;
  }
  return `Deployment/${name} spec edited${by}; Ferry's fields re-applied`;
}
