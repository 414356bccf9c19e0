// The activity another team's worker hosts to serve or update a model from their own workflow (a trigger such as
// "training finished"). The client implements it (`createServingActivities`); workflows call it through
// `applyServedModel` in workflows/compose/.
import type { ModelRef } from './identity.js';
import type { ServeModelOptions, UpdateResult } from './messages.js';
import type { DeleteModelCommandInput, DeleteServedModelOutput } from './nexus.js';
import type { ModelStatus } from './status.js';

export interface ApplyServedModelInput {
  /** The ServedModel document, as people write it. */
  document: unknown;
  /** Knobs for a model this call starts; production leaves them unset. */
  workflowOptions?: ServeModelOptions;
  /** The tenant asking: set only by a tenant's Nexus handler (docs/security.md). */
  tenant?: string;
  /** Who asks, for audit; unset: the client's Temporal identity. */
  requestedBy?: string;
  /**
   * Start the model only (`applyModel`'s `claim`): a model of the name that runs already, unless a call with this
   * claim started it, is sent nothing, and the call fails with `NameConflict`.
   */
  claim?: string;
}

export interface ApplyServedModelResult extends UpdateResult {
  ref: ModelRef;
  workflowId: string;
  runId: string;
  /** True when no workflow was running for the model and this call started one. */
  started: boolean;
}

export interface ServingActivities {
  /** Serve `document`, or make it the running model's spec: one Update-with-Start; the same document again is a no-op. */
  applyServedModel(input: ApplyServedModelInput): Promise<ApplyServedModelResult>;
  /** Waits (heartbeating) until the model is Ready at `generation` or newer; fails with its reason if it fails. */
  awaitModelReady(input: { ref: ModelRef; generation: number; timeoutMs?: number }): Promise<ModelStatus>;
  /**
   * Tears the model down and waits until it is gone (already gone is fine), or `waitMs` (then `pending`; a delete not
   * even accepted by then is sent as the delete signal, `signalled`).
   */
  deleteServedModel(input: DeleteModelCommandInput): Promise<DeleteServedModelOutput>;
}
