// Runs Ferry's evaluateCheckpointWorkflow on this program's own worker and task queue, with an evaluation activity
// that runs until it is cancelled, and prints a JSON line per event: started, then how the parent ended (the test
// terminates it while it evaluates). Exits once the parent has ended.
import { Context } from '@temporalio/activity';
import { consumerWorker } from './worker.mjs';

const doc = JSON.parse(process.argv[2]);
const activities = {
  // A long evaluation: it heartbeats until it is cancelled.
  async evaluateForever() {
    for (;;) {
      Context.current().heartbeat();
      await Context.current().sleep(200);
    }
  },
};
const { taskQueue, worker, client, close } = await consumerWorker('evaluator', activities);
const outcome = await worker.runUntil(async () => {
  const parent = await client.workflow.start('evaluateCheckpointWorkflow', {
    taskQueue,
    workflowId: taskQueue,
    args: [{ model: doc, evaluation: { activity: 'evaluateForever', retry: { maximumAttempts: 1 } } }],
  });
  console.log(JSON.stringify({ started: parent.workflowId }));
  return await parent.result().then(
    () => 'completed',
    (err) => err.cause?.constructor?.name ?? String(err),
  );
});
console.log(JSON.stringify({ ended: outcome }));
await close();
