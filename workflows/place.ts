// PlaceModelWorkflow: placement at start (docs/design/fleet.md, §3). The client library starts it, on the task queue of
// the first listed cluster whose worker polls, for a document with `spec.placement`; it asks each listed cluster's
// worker for its free GPUs (`clusterCapacity`, on that cluster's own task queue, all at once) and returns the cluster
// the model's replicas fit on with the most GPUs left, and why. A cluster whose worker does not pick the reading up
// within `answerWithinMs` is passed over, and said so. None fits: it fails with `NoCapacity`, naming each cluster's
// free GPUs. It creates nothing: the client then serves the model there. Not a reservation: two placements at once may
// count the same GPUs, and the scheduler stays the judge. Its cost: one short workflow and one activity a cluster.
import { ActivityFailure, proxyActivities, setWorkflowOptions, TimeoutFailure } from '@temporalio/workflow';
import {
  choosePlacement,
  failure,
  FAILURE,
  taskQueueFor,
  type ClusterCapacity,
  type FerryActivities,
  type PlaceModelInput,
  type PlaceModelResult,
} from './contract/index.js';
import { whenVersioned } from './pinned.js';

/** How long a cluster's worker has to pick its reading up, unless the input says. */
const ANSWER_WITHIN_MS = 10_000;

export async function PlaceModelWorkflow(input: PlaceModelInput): Promise<PlaceModelResult> {
  const answerWithinMs = input.answerWithinMs ?? ANSWER_WITHIN_MS;
  const answers = await Promise.all(
    input.clusters.map(async (cluster): Promise<ClusterCapacity | { cluster: string; unanswered: string }> => {
      const { clusterCapacity } = proxyActivities<FerryActivities>({
        taskQueue: taskQueueFor(cluster),
        // No worker for the cluster: not retried, the cluster passed over.
        scheduleToStartTimeout: answerWithinMs,
        // Two list requests, each with its own retries (30 s at most): two attempts.
        startToCloseTimeout: 40_000,
        retry: { initialInterval: 1_000, maximumAttempts: 2 },
      });
      try {
        return { cluster, ...(await clusterCapacity(input.capacity)) };
      } catch (err) {
        return { cluster, unanswered: whyUnanswered(err, cluster, answerWithinMs) };
      }
    }),
  );
  const choice = choosePlacement(input.demand, answers);
  if (choice.cluster === undefined) {
    throw failure(FAILURE.NoCapacity, choice.reason, { clusters: choice.clusters });
  }
  return { cluster: choice.cluster, reason: choice.reason, clusters: choice.clusters };
}

function whyUnanswered(err: unknown, cluster: string, answerWithinMs: number): string {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof TimeoutFailure && cause.timeoutType === 'SCHEDULE_TO_START') {
    return `no worker of ${taskQueueFor(cluster)} took the reading within ${Math.round(answerWithinMs / 1000)} s`;
  }
  const typed = cause as { type?: string; message?: string } | undefined;
  return `${typed?.type ? `${typed.type}: ` : ''}${typed?.message ?? String(cause)}`;
}

// Auto-upgrade, as the move and the command workflows: it owns nothing a version of the worker must keep.
setWorkflowOptions(whenVersioned('AUTO_UPGRADE'), PlaceModelWorkflow);
