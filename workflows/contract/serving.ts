// The activity another team's worker hosts to serve or update a model from their own workflow (a trigger such as
// "training finished"). The client implements it (`createServingActivities`); workflows call it through
// `applyServedModel` in workflows/compose/.
import type { ServeModelOptions, UpdateResult } from './messages.js';

export interface ApplyServedModelInput {
  /** The ServedModel document, as people write it. */
  document: unknown;
  /** Knobs for a model this call starts; production leaves them unset. */
  workflowOptions?: ServeModelOptions;
}

export interface ApplyServedModelResult extends UpdateResult {
  workflowId: string;
  runId: string;
  /** True when no workflow was running for the model and this call started one. */
  started: boolean;
}

export interface ServingActivities {
  /** Serve `document`, or make it the running model's spec: one Update-with-Start; the same document again is a no-op. */
  applyServedModel(input: ApplyServedModelInput): Promise<ApplyServedModelResult>;
}
