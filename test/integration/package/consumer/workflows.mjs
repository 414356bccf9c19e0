// Another team's workflow, in their own bundle on their own task queue: a model that exists only while this
// workflow needs it — served as a child on Ferry's task queue, Ready, used, deleted (withServedModel deletes it
// however the body ends). Imports only the package's workflow-safe entry point.
import { withServedModel } from '@ferry-dev/ferry/workflow';

export async function serveThenDelete(doc) {
  return await withServedModel(doc, async (model) => ({ phase: 'Ready', endpoint: model.endpoint }));
}

// Ferry's checkpoint-evaluation workflow, hosted on this team's worker.
export { evaluateCheckpointWorkflow } from '@ferry-dev/ferry/workflow';
