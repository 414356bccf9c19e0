// The serving activities (client/serving-activities.ts) as Ferry's own workflows call them: the Nexus service's
// command workflows (commands.ts) and the move between clusters (move.ts). Each acts on a model through its workflow.
import { proxyActivities } from '@temporalio/workflow';
import type { ServingActivities } from './contract/index.js';

export const { applyServedModel, deleteServedModel } = proxyActivities<ServingActivities>({
  startToCloseTimeout: 2 * 60_000,
  retry: { maximumInterval: 30_000 },
});

/** `deleteServedModel` for a wait of `waitMs` on the teardown (then it returns `pending`, or `signalled`). */
export function deleteServedModelWithin(waitMs: number): ServingActivities['deleteServedModel'] {
  return proxyActivities<ServingActivities>({
    startToCloseTimeout: waitMs + 2 * 60_000,
    heartbeatTimeout: 60_000,
    retry: { maximumInterval: 30_000 },
  }).deleteServedModel;
}

/** `awaitModelReady` for a wait of `timeoutMs` (unset: 6 h at most per attempt). */
export function awaitModelReadyWithin(timeoutMs: number | undefined): ServingActivities['awaitModelReady'] {
  return proxyActivities<ServingActivities>({
    // The wait's own budget, plus room for a retry after a lost worker; the heartbeat notices a lost one sooner.
    startToCloseTimeout: (timeoutMs ?? 6 * 3_600_000) + 60_000,
    heartbeatTimeout: 60_000,
    retry: { maximumInterval: 30_000 },
  }).awaitModelReady;
}
