// Runs serveThenDelete(doc) from workflows.mjs on this program's own worker and task queue, and reports what the
// workflow bundle contains.
import { consumerWorker } from './worker.mjs';

const doc = JSON.parse(process.argv[2]);
const { bundle, taskQueue, worker, client, close } = await consumerWorker('consumer');
const result = await worker.runUntil(
  client.workflow.execute('serveThenDelete', { taskQueue, workflowId: taskQueue, args: [doc] }),
);
console.log(
  JSON.stringify({
    result,
    bundle: {
      bytes: bundle.code.length,
      kubernetesClient: bundle.code.includes('@kubernetes/client-node'),
      ferryActivities: bundle.code.includes('createActivities'),
      zod: bundle.code.includes('zod'),
    },
  }),
);
await close();
