// Placement at start (docs/design/fleet.md, §3): a model whose document lists `spec.placement.clusters` is served on
// the one of them where its replicas fit with the most GPUs left. PlaceModelWorkflow reads each cluster's free GPUs
// (`clusterCapacity`, on that cluster's worker) and `choosePlacement` decides. Pure but for the query's definition.
import type { ModelRef } from './identity.js';
import type { ServedModel, Toleration } from './spec/index.js';
import { startingReplicas } from './spec/index.js';

/** What `clusterCapacity` is asked: which extended resource counts as a GPU, and which nodes the model may use. */
export interface ClusterCapacityInput {
  /** The resource each replica asks for, `spec.resources.gpuResource` (`nvidia.com/gpu`). */
  resource: string;
  /** `spec.scheduling.nodeSelector`: nodes without these labels are not counted. */
  nodeSelector?: Record<string, string>;
  /** `spec.scheduling.tolerations`: a node with a NoSchedule or NoExecute taint none tolerates is not counted. */
  tolerations?: Toleration[];
}

/** What `clusterCapacity` answers: the cluster's GPU nodes the model could use, each with its free GPUs. */
export interface CapacityReading {
  nodes: NodeCapacity[];
}

/** One Ready, schedulable node: its allocatable GPUs less those the pods bound to it that have not ended ask for. */
export interface NodeCapacity {
  name: string;
  allocatable: number;
  free: number;
}

/** A reading and the cluster it is of. */
export interface ClusterCapacity extends CapacityReading {
  cluster: string;
}

/** What the model asks for: `replicas` pods of `gpus` GPUs each; `sameNode`: every replica on one node. */
export interface GpuDemand {
  replicas: number;
  gpus: number;
  sameNode: boolean;
}

/** One listed cluster as the placement saw it. */
export type ClusterReading =
  | { cluster: string; free: number; nodes: NodeCapacity[]; fits: boolean; leftAfter?: number }
  | { cluster: string; unanswered: string };

export interface PlaceModelInput {
  /** The model, on the first listed cluster (where the placement runs). */
  ref: Pick<ModelRef, 'namespace' | 'name'>;
  clusters: string[];
  demand: GpuDemand;
  capacity: ClusterCapacityInput;
  /** How long a cluster's worker has to pick its capacity reading up; default 10 s. */
  answerWithinMs?: number;
}

export interface PlaceModelResult {
  /** The cluster chosen. */
  cluster: string;
  /** Why, in one line: what it had free, and what the others had. */
  reason: string;
  clusters: ClusterReading[];
}

/** `place/<namespace>/<name>`: one placement of a name at a time. */
export function placeWorkflowIdFor({ namespace, name }: Pick<ModelRef, 'namespace' | 'name'>): string {
  return `place/${namespace}/${name}`;
}

/** What the placement asks each cluster's worker, from the model's document. */
export function capacityInputOf(model: ServedModel): ClusterCapacityInput {
  const { resources, scheduling } = model.spec;
  return {
    resource: resources.gpuResource,
    nodeSelector: scheduling.nodeSelector,
    tolerations: scheduling.tolerations,
  };
}

/** The model's demand: replicas it starts with, GPUs each, whether they share a node (a ReadWriteOnce volume). */
export function gpuDemandOf(model: ServedModel): GpuDemand {
  const { spec } = model;
  return {
    replicas: startingReplicas(spec.replicas, spec.scaling),
    gpus: spec.resources.gpus,
    sameNode: replicasShareNode(model),
  };
}

/** Replicas on a ReadWriteOnce volume run on one node (`scheduling.colocateReplicas`, the Deployment's affinity). */
export function replicasShareNode(model: ServedModel): boolean {
  return model.spec.scheduling.colocateReplicas === true && model.spec.storage.accessMode === 'ReadWriteOnce';
}

/** How many GPUs are left on the cluster once the demand is placed, node by node; undefined when it does not fit. */
export function leftAfterPlacing(nodes: readonly NodeCapacity[], demand: GpuDemand): number | undefined {
  const free = nodes.reduce((sum, node) => sum + Math.max(0, node.free), 0);
  const needed = demand.replicas * demand.gpus;
  if (needed === 0) return free;
  if (demand.sameNode) return nodes.some((node) => node.free >= needed) ? free - needed : undefined;
  // Each replica on one node: a node holds as many as its free GPUs divide into.
  const slots = nodes.reduce((sum, node) => sum + Math.floor(Math.max(0, node.free) / demand.gpus), 0);
  return slots >= demand.replicas ? free - needed : undefined;
}

export type PlacementChoice =
  | { cluster: string; reason: string; clusters: ClusterReading[] }
  | { cluster?: undefined; reason: string; clusters: ClusterReading[] };

/**
 * The choice: of the clusters where the demand fits node by node, the one with the most GPUs left after it; a tie goes
 * to the one listed first. A cluster whose worker did not answer is passed over. None fits: no cluster, and a reason
 * that names each cluster's free GPUs (or that it did not answer).
 */
export function choosePlacement(
  demand: GpuDemand,
  answers: readonly (ClusterCapacity | { cluster: string; unanswered: string })[],
): PlacementChoice {
  const clusters: ClusterReading[] = answers.map((answer) => {
    if ('unanswered' in answer) return answer;
    const leftAfter = leftAfterPlacing(answer.nodes, demand);
    const free = answer.nodes.reduce((sum, node) => sum + Math.max(0, node.free), 0);
    return { cluster: answer.cluster, free, nodes: answer.nodes, fits: leftAfter !== undefined, leftAfter };
  });
  let best: Extract<ClusterReading, { fits: boolean }> | undefined;
  for (const reading of clusters) {
    if (!('fits' in reading) || !reading.fits) continue;
    if (!best || reading.leftAfter! > best.leftAfter!) best = reading;
  }
  const seen = clusters.map(describeReading).join('; ');
  const asked = describeDemand(demand);
  if (!best) return { reason: `no listed cluster has room for ${asked}: ${seen}`, clusters };
  return { cluster: best.cluster, reason: `the most GPUs left after ${asked}: ${seen}`, clusters };
}

/** `2 replicas × 1 GPU on one node`, `1 replica × 4 GPUs`. */
export function describeDemand({ replicas, gpus, sameNode }: GpuDemand): string {
  const what = `${replicas} replica${replicas === 1 ? '' : 's'} × ${gpus} GPU${gpus === 1 ? '' : 's'}`;
  return sameNode && replicas > 1 ? `${what} on one node` : what;
}

function describeReading(reading: ClusterReading): string {
  if ('unanswered' in reading) return `${reading.cluster}: no answer (${reading.unanswered})`;
  const largest = Math.max(0, ...reading.nodes.map((node) => node.free));
  const nodes = `${reading.nodes.length} node${reading.nodes.length === 1 ? '' : 's'}`;
  const fits = reading.fits ? `${reading.leftAfter} left after` : 'does not fit';
  return `${reading.cluster}: ${reading.free} GPUs free on ${nodes} (at most ${largest} on one), ${fits}`;
}

/**
 * The document as served on `cluster`: `spec.cluster` set to it and no `spec.placement` (a served document names its
 * cluster). For the placed model's start (client/place-model.ts) and a move's target (workflows/move.ts).
 */
export function documentOnCluster(document: unknown, cluster: string): unknown {
  const { spec, ...rest } = document as { spec?: Record<string, unknown> };
  const { placement: _placement, ...fields } = spec ?? {};
  return { ...rest, spec: { ...fields, cluster } };
}
