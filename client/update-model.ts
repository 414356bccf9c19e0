// Change a running model's spec: a Workflow Update, validated by the workflow with the same schema as at start.
import type { Client } from '@temporalio/client';
import {
  type ModelRef,
  modelRefOf,
  type ModelStatus,
  updateModelUpdate,
  type UpdateResult,
} from '../workflows/contract/index.js';
import { parseServingDocument } from './document.js';
import type { EarlyUpdate } from './early-update.js';
import { notPlaced, servedDocument } from './place-model.js';
import { defaultReadyTimeoutMs } from './serve-model.js';
import { sendUpdate, updateOutcome } from './send-update.js';
import { waitForPhase } from './wait-for-phase.js';

export interface UpdateOptions {
  /** Resolve only once the cluster is Ready at the new generation (rejects with `ModelFailedError` if it fails). */
  wait?: boolean;
  /** How long `wait` may take. Default: the new spec's download deadline plus startup timeout plus 10 minutes. */
  timeoutMs?: number;
  onStatus?: (status: ModelStatus) => void;
}

export interface UpdateModelResult extends UpdateResult {
  ref: ModelRef;
  /** The Ready status at the new generation, with `wait`. */
  status?: ModelStatus;
}

/**
 * Sends `doc` as the model's new spec. Throws `InvalidSpecError` when the document is invalid (checked here first)
 * or the workflow rejects it (an immutable field changed), `ModelNotFoundError` when the model is not running.
 * Sending the spec a model already has changes nothing, except that it retries a Failed model.
 */
export async function updateModel(
  client: Client,
  doc: unknown,
  options: UpdateOptions = {},
): Promise<UpdateModelResult> {
  return updateModelAfter(undefined, client, doc, options);
}

/** `updateModel`, going on under the update the CLI already sent, if it is this one (`ferry update`). */
export async function updateModelAfter(
  early: EarlyUpdate | undefined,
  client: Client,
  input: unknown,
  options: UpdateOptions = {},
): Promise<UpdateModelResult> {
  // A placed model's document goes to the listed cluster that serves it.
  const { doc, spec, running } = await servedDocument(client, input, parseServingDocument(input));
  if (!running) throw notPlaced(spec);
  const ref = modelRefOf(spec);
  const request = { spec: doc, requestedBy: client.options.identity };
  const handle = await sendUpdate(client, ref, updateModelUpdate, request, undefined, early);
  const result: UpdateModelResult = { ...(await updateOutcome(handle, ref)), ref };
  if (!options.wait) return result;
  const status = await waitForPhase(client, ref, ['Ready'], {
    timeoutMs: options.timeoutMs ?? defaultReadyTimeoutMs(spec),
    generation: result.generation,
    onStatus: options.onStatus,
  });
  return { ...result, status };
}
