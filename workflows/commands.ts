// Short command workflows on Ferry's worker behind the Nexus service's long operations. They act on a model through
// its own workflow (Update-with-Start, the delete Update) and never own it: cancelling a command stops the command.
import { ActivityFailure, ApplicationFailure, proxyActivities, setWorkflowOptions } from '@temporalio/workflow';
import {
  taskQueueFor,
  type DeleteModelCommandInput,
  type DeleteModelOperationOutput,
  type EnsureModelCommandInput,
  type EnsureModelOutput,
  type FerryActivities,
} from './contract/index.js';
import { whenVersioned } from './pinned.js';
import { applyServedModel, awaitModelReadyWithin, deleteServedModel } from './serving-calls.js';

/** Serves or updates the model, then waits until it is Ready at that generation. */
export async function ensureModelWorkflow(input: EnsureModelCommandInput): Promise<EnsureModelOutput> {
  // No patch: only a command its handler started with `checkGrantOn` takes this branch, and no older one has it.
  if (input.tenant !== undefined && input.checkGrantOn !== undefined) {
    await checkGrant(input.tenant, input.checkGrantOn, input.document);
  }
  // A tenant's command (its endpoint's handler set the tenant) acts as that tenant; an older command had none.
  const applied = await applyServedModel({
    document: input.document,
    ...(input.tenant !== undefined ? { tenant: input.tenant } : {}),
    ...(input.requestedBy !== undefined ? { requestedBy: input.requestedBy } : {}),
  });
  const awaitModelReady = awaitModelReadyWithin(input.timeoutMs);
  const { ref } = applied;
  const status = await awaitModelReady({ ref, generation: applied.generation, timeoutMs: input.timeoutMs });
  return {
    ref,
    workflowId: applied.workflowId,
    generation: status.observedGeneration,
    endpoint: status.endpoint ?? '',
    servedModelName: status.servedModelName,
  };
}

/**
 * The tenant's grant checked by the worker of the model's cluster (the labels of the Secrets and PVCs it allows by
 * label). A refusal fails the command with the activity's own `Forbidden`, before anything is started or changed.
 */
async function checkGrant(tenant: string, cluster: string, document: unknown): Promise<void> {
  const { checkTenantGrant } = proxyActivities<FerryActivities>({
    taskQueue: taskQueueFor(cluster),
    startToCloseTimeout: 60_000,
    retry: { maximumInterval: 10_000 },
  });
  try {
    await checkTenantGrant({ tenant, document });
  } catch (err) {
    throw err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? err.cause : err;
  }
}

/** Deletes the model and waits until its teardown is done. */
export async function deleteModelWorkflow(input: DeleteModelCommandInput): Promise<DeleteModelOperationOutput> {
  return await deleteServedModel(input);
}

// Auto-upgrade (Worker Versioning, docs/design/upgrades.md): a command is one or two activities, but its wait may last
// hours; pinned, it would keep an old version of the worker up that long. A change to what these functions do with
// an input an older release could have started them with takes a patch.
setWorkflowOptions(whenVersioned('AUTO_UPGRADE'), ensureModelWorkflow);
setWorkflowOptions(whenVersioned('AUTO_UPGRADE'), deleteModelWorkflow);
