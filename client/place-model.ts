// Placement at start (docs/design/fleet.md, §3): a document with `spec.placement` is served on one of its clusters,
// chosen once in the model's life. A model of the name that runs on a listed cluster already is where the document
// goes; otherwise PlaceModelWorkflow reads each listed cluster's free GPUs and chooses, and the document is served
// there with `spec.cluster` set to that cluster and without `spec.placement`, as if it had named it.
import { WorkflowFailedError, WorkflowIdConflictPolicy, WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { PlaceModelWorkflow } from '../workflows/place.js';
import {
  capacityInputOf,
  choosePlacement,
  documentOnCluster,
  FAILURE,
  gpuDemandOf,
  placeWorkflowIdFor,
  taskQueueFor,
  type ClusterReading,
  type ModelRef,
  type PlaceModelResult,
  type ServedModel,
} from '../workflows/contract/index.js';
import { parseModelDocument } from './document.js';
import { FerryClientError, ModelNotFoundError, NoCapacityError } from './errors.js';
import { hasWorker, modelHandle } from './model-status.js';

/** Where a placed document went, and why. */
export interface Placement {
  cluster: string;
  /** One line: the free GPUs the choice saw, or that the model is served there already. */
  reason: string;
  /** False when a model of the name was served on `cluster` already: nothing was chosen. */
  placed: boolean;
  /** With `placed`: each listed cluster as the placement saw it. */
  clusters?: ClusterReading[];
  /** With `placed`: the placement's workflow, `place/<namespace>/<name>`. */
  workflowId?: string;
}

/** A placement that completed within this long is reused: a serve of the name racing the one before goes with it. */
const RECENT_PLACEMENT_MS = 60_000;
/** How long the placement may take: a reading from each cluster, each given 10 s to be picked up, 40 s to answer. */
const PLACEMENT_TIMEOUT_MS = 2 * 60_000;

/**
 * For a document with `spec.placement`: the cluster that serves it already (among those listed), else the one placed
 * now, and the document to serve there. Without placement: the document as it is. `NoCapacityError` when no listed
 * cluster has room, with nothing created.
 */
export async function placeDocument(
  client: Client,
  doc: unknown,
  spec: ServedModel,
): Promise<{ doc: unknown; placement?: Placement }> {
  const clusters = spec.spec.placement?.clusters;
  if (!clusters) return { doc };
  const serving = await servingCluster(client, spec);
  const placement: Placement = serving
    ? { cluster: serving, reason: `served on cluster ${serving} already (placed when first served)`, placed: false }
    : await place(client, spec);
  return { doc: documentOnCluster(doc, placement.cluster), placement };
}

/**
 * A placed document as its model is served, for the commands that act on a running model (update, delete, diff, a
 * server-side dry run): on the listed cluster that serves it (`running`), else on the first listed. Unplaced: as it is.
 */
export async function servedDocument(
  client: Client,
  doc: unknown,
  spec: ServedModel,
): Promise<{ doc: unknown; spec: ServedModel; running: boolean }> {
  const clusters = spec.spec.placement?.clusters;
  if (!clusters) return { doc, spec, running: true };
  const serving = await servingCluster(client, spec);
  const served = documentOnCluster(doc, serving ?? clusters[0]!);
  return { doc: served, spec: parseModelDocument(served), running: serving !== undefined };
}

/** A placed model that no listed cluster serves: what update and delete say. */
export function notPlaced(spec: ServedModel): ModelNotFoundError {
  const clusters = spec.spec.placement?.clusters ?? [spec.spec.cluster];
  return new ModelNotFoundError(
    { ...refOf(spec), cluster: clusters[0]! },
    `not served on any cluster of its placement (${clusters.join(', ')})`,
  );
}

/**
 * The first listed cluster a model of the name runs on, read from each cluster's workflow ID (exact, where
 * visibility's `FerryCluster` lags a second behind a start).
 */
export async function servingCluster(client: Client, spec: ServedModel): Promise<string | undefined> {
  const clusters = spec.spec.placement?.clusters ?? [spec.spec.cluster];
  const running = await Promise.all(
    clusters.map(async (cluster) => {
      const execution = await modelHandle(client, { ...refOf(spec), cluster })
        .describe()
        .catch((err: unknown) => {
          if (err instanceof WorkflowNotFoundError) return undefined;
          throw err;
        });
      return execution?.status.name === 'RUNNING';
    }),
  );
  return clusters[running.indexOf(true)];
}

async function place(client: Client, spec: ServedModel): Promise<Placement> {
  const ref = refOf(spec);
  const clusters = spec.spec.placement!.clusters;
  const workflowId = placeWorkflowIdFor(ref);
  const handle = client.workflow.getHandle<typeof PlaceModelWorkflow>(workflowId);
  const recent = await recentResult(handle);
  if (recent)
    return { cluster: recent.cluster, reason: recent.reason, clusters: recent.clusters, placed: true, workflowId };
  // The placement runs on the first listed cluster whose worker polls; with none, no cluster can answer.
  const withWorker = await Promise.all(clusters.map((cluster) => hasWorker(client, taskQueueFor(cluster))));
  const runner = clusters[withWorker.indexOf(true)];
  if (runner === undefined) {
    const choice = choosePlacement(
      gpuDemandOf(spec),
      clusters.map((cluster) => ({ cluster, unanswered: `no worker polls ${taskQueueFor(cluster)}` })),
    );
    throw new NoCapacityError(ref, choice.clusters, choice.reason);
  }
  try {
    const result = await client.workflow.execute<typeof PlaceModelWorkflow>('PlaceModelWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(runner),
      // Two placements of a name at once are one: the second gets the first's answer.
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      workflowExecutionTimeout: PLACEMENT_TIMEOUT_MS,
      args: [{ ref, clusters, demand: gpuDemandOf(spec), capacity: capacityInputOf(spec) }],
      staticSummary: `placement of ${ref.namespace}/${ref.name} among ${clusters.join(', ')}`,
    });
    return { cluster: result.cluster, reason: result.reason, clusters: result.clusters, placed: true, workflowId };
  } catch (err) {
    throw placementError(ref, err);
  }
}

/** The result of a placement of the name that completed within the last minute, if any. */
async function recentResult(
  handle: ReturnType<Client['workflow']['getHandle']>,
): Promise<PlaceModelResult | undefined> {
  const execution = await handle.describe().catch(() => undefined);
  const closed = execution?.closeTime?.getTime();
  if (execution?.status.name !== 'COMPLETED' || closed === undefined || Date.now() - closed > RECENT_PLACEMENT_MS) {
    return undefined;
  }
  return (await handle.result()) as PlaceModelResult;
}

function placementError(ref: Pick<ModelRef, 'namespace' | 'name'>, err: unknown): unknown {
  if (!(err instanceof WorkflowFailedError)) return err;
  const cause = err.cause as { type?: string; message?: string; details?: unknown[] } | undefined;
  if (cause?.type === FAILURE.NoCapacity) {
    const details = cause.details?.[0] as { clusters?: ClusterReading[] } | undefined;
    return new NoCapacityError(ref, details?.clusters ?? [], cause.message ?? 'no listed cluster has room');
  }
  return new FerryClientError(`the placement of ${ref.namespace}/${ref.name} failed: ${cause?.message ?? err.message}`);
}

const refOf = (spec: ServedModel) => ({ namespace: spec.metadata.namespace, name: spec.metadata.name });
