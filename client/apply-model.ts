// Bring a model to a spec whether or not it is served yet: the declarative verb for specs kept in git, and for a
// pipeline that has a new checkpoint to serve. One Update-with-Start: the workflow is started if it is not running,
// and the spec is sent to it as an `update` either way, atomically, so two appliers cannot race start against update.
import {
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  type Client,
} from '@temporalio/client';
import {
  CLAIM_MEMO,
  type ModelRef,
  modelRefOf,
  type ModelStatus,
  type ServeModelOptions,
  updateModelUpdate,
  type UpdateResult,
} from '../workflows/contract/index.js';
import type { ServeModelWorkflow } from '../workflows/serve-model.js';
import { ModelExistsError } from './errors.js';
import { modelHandle } from './model-status.js';
import { accepted, ACCEPT_TIMEOUT_MS, updateOutcome } from './send-update.js';
import type { Placement } from './place-model.js';
import { defaultReadyTimeoutMs, placedSpec, runningRunId, startOptionsFor, WORKFLOW_TYPE } from './serve-model.js';
import { waitForPhase } from './wait-for-phase.js';

export interface ApplyOptions {
  /** Resolve only once the model is Ready at the applied generation (rejects with `ModelFailedError` if it fails). */
  wait?: boolean;
  /** How long `wait` may take. Default: the spec's download deadline plus its startup timeout plus 10 minutes. */
  timeoutMs?: number;
  onStatus?: (status: ModelStatus) => void;
  /** Workflow knobs for a model this call starts (watch interval, retries); production leaves them unset. */
  workflowOptions?: ServeModelOptions;
  /**
   * The tenant asking (set only by that tenant's Nexus handler, docs/security.md): a model this call starts is
   * theirs, and a running one that is not theirs refuses the update as `ModelNotFoundError`.
   */
  tenant?: string;
  /** Who asks, recorded for audit (default: the client's Temporal identity); a tenant's handler names the tenant. */
  requestedBy?: string;
  /**
   * Start the model only, as this claim: when a model of the name runs already, reject with `ModelExistsError` and
   * send it nothing, unless a call with this same claim started it (a retry of that call), which then applies as
   * usual. The claim is kept in the workflow's memo. A move claims its target with its own ID, so a model of the name
   * that someone serves on the target in the meantime is never changed by the move.
   */
  claim?: string;
}

export interface ApplyResult extends UpdateResult {
  ref: ModelRef;
  workflowId: string;
  runId: string;
  /** True when no workflow was running for the model and this call started one. */
  started: boolean;
  /** The Ready status at `generation`, with `wait`. */
  status?: ModelStatus;
  /** With `spec.placement`: the cluster the document went to, and why. */
  placement?: Placement;
}

/**
 * Validates `doc` and makes it the model's spec: starts serving it when the model is not running, updates it when
 * it is (a no-op when the spec is unchanged; a retry when the model is Failed). Throws `InvalidSpecError` before
 * anything is started or sent, and when the workflow rejects the change (an immutable field); `ModelDeletedError`
 * while the model is being deleted. With `spec.placement` the document goes to the listed cluster that serves the
 * model, else to the one placed now (`NoCapacityError`, nothing started, when none has room).
 */
export async function applyModel(client: Client, input: unknown, options: ApplyOptions = {}): Promise<ApplyResult> {
  const { spec, doc, placement } = await placedSpec(client, input);
  const ref = modelRefOf(spec);
  const previousRunId = await runningRunId(client, ref);
  const requestedBy = options.requestedBy ?? client.options.identity;
  const owner = { ...(options.tenant !== undefined ? { tenant: options.tenant } : {}), requestedBy };
  let claim: string | undefined;
  // Sent again (a new start operation each time) if the server aborts the update or rejects it unseen.
  const handle = await accepted(client, ref, updateModelUpdate.name, ACCEPT_TIMEOUT_MS, async (updateId) => {
    // With a claim, a start that fails when the model runs; none when the running one is this claim's own (a retry of
    // this call, or of a send of it that started the workflow and had its update aborted).
    claim = options.claim !== undefined && !(await claimedBy(client, ref, options.claim)) ? options.claim : undefined;
    return await client.workflow.startUpdateWithStart(updateModelUpdate, {
      args: [{ spec: doc, ...owner }],
      waitForStage: 'ACCEPTED',
      updateId,
      startWorkflowOperation: new WithStartWorkflowOperation<typeof ServeModelWorkflow>(
        WORKFLOW_TYPE,
        startOptionsFor(spec, options.workflowOptions, owner, claim),
      ),
    });
  }).catch((err: unknown) => {
    throw claim !== undefined && err instanceof WorkflowExecutionAlreadyStartedError ? new ModelExistsError(ref) : err;
  });
  const outcome = await updateOutcome(handle, ref);
  // The run the update went to: the one this call started, or the one that was running.
  const runId = handle.workflowRunId ?? (await modelHandle(client, ref).describe()).runId;
  const result: ApplyResult = {
    ...outcome,
    ref,
    workflowId: handle.workflowId,
    runId,
    started: runId !== previousRunId,
    ...(placement ? { placement } : {}),
  };
  if (!options.wait) return result;
  const status = await waitForPhase(client, ref, ['Ready'], {
    timeoutMs: options.timeoutMs ?? defaultReadyTimeoutMs(spec),
    generation: outcome.generation,
    onStatus: options.onStatus,
  });
  return { ...result, status };
}

/** Whether the model's running workflow was started with `claim` (no workflow running: no). */
async function claimedBy(client: Client, ref: ModelRef, claim: string): Promise<boolean> {
  const running = await modelHandle(client, ref)
    .describe()
    .catch((err: unknown) => {
      if (err instanceof WorkflowNotFoundError) return undefined;
      throw err;
    });
  return running?.status.name === 'RUNNING' && running.memo?.[CLAIM_MEMO] === claim;
}
