// Activities for another team's worker: serve or update a model from their own workflow, through applyModel's
// Update-with-Start. Idempotent by content: the same document again changes nothing, so a retried activity, or a
// "training finished" event delivered twice, serves once.
import type { Client } from '@temporalio/client';
import {
  failure,
  FAILURE,
  formatSpecIssues,
  type ApplyServedModelInput,
  type ApplyServedModelResult,
  type ServingActivities,
} from '../workflows/contract/index.js';
import { applyModel } from './apply-model.js';
import { InvalidSpecError, ModelDeletedError } from './errors.js';

/** The serving activities on `client`; register them on the caller's worker (`activities: { ...serving }`). */
export function createServingActivities(client: Client): ServingActivities {
  return {
    async applyServedModel({ document, workflowOptions }: ApplyServedModelInput): Promise<ApplyServedModelResult> {
      try {
        const { workflowId, runId, started, accepted, generation, changed, sourceChanged, changes } = await applyModel(
          client,
          document,
          workflowOptions ? { workflowOptions } : {},
        );
        return { workflowId, runId, started, accepted, generation, changed, sourceChanged, changes };
      } catch (err) {
        // What no retry fixes fails the calling workflow's activity at once, typed as the catalogue says.
        if (err instanceof InvalidSpecError)
          throw failure(FAILURE.InvalidSpec, formatSpecIssues(err.issues), err.issues);
        if (err instanceof ModelDeletedError) throw failure(FAILURE.ModelDeleting, err.message);
        throw err;
      }
    },
  };
}
