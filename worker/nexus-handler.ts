// The `ferry.models.v1` Nexus service, hosted by Ferry's worker. The long operations start command workflows on this
// worker (their IDs come from the caller's request ID, stable across the caller's retries); the status is answered
// at once from the model's own workflow.
import * as temporalNexus from '@temporalio/nexus';
import * as nexus from 'nexus-rpc';
import { getModelStatus } from '../client/model-status.js';
import {
  ferryModelsService,
  modelRefOf,
  formatSpecIssues,
  safeParseServedModel,
  workflowIdFor,
  type DeleteModelOperationInput,
  type DeleteModelOperationOutput,
  type EnsureModelInput,
  type EnsureModelOutput,
} from '../workflows/contract/index.js';

export const ferryModelsHandler = nexus.serviceHandler(ferryModelsService, {
  ensureModel: new temporalNexus.WorkflowRunOperationHandler<EnsureModelInput, EnsureModelOutput>(
    async (ctx, input) => {
      const parsed = safeParseServedModel(input.document);
      if (!parsed.ok) throw new nexus.HandlerError('BAD_REQUEST', formatSpecIssues(parsed.issues));
      const ref = modelRefOf(parsed.model);
      return await temporalNexus.startWorkflow(ctx, 'ensureModelWorkflow', {
        args: [input],
        workflowId: `ensure/${workflowIdFor(ref)}/${ctx.requestId}`,
      });
    },
  ),
  deleteModel: new temporalNexus.WorkflowRunOperationHandler<DeleteModelOperationInput, DeleteModelOperationOutput>(
    async (ctx, input) =>
      await temporalNexus.startWorkflow(ctx, 'deleteModelWorkflow', {
        args: [input],
        workflowId: `delete/${workflowIdFor(input.ref)}/${ctx.requestId}`,
      }),
  ),
  getModelStatus: async (_ctx, { ref }) => await getModelStatus(temporalNexus.getClient(), ref),
});
