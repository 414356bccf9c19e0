// Runs Ferry's evaluateCheckpointWorkflow on this program's own worker and task queue, with an evaluation activity
// that runs until it is cancelled, and prints a JSON line per event: started, then how the parent ended (the test
// terminates it while it evaluates). Exits once the parent has ended.
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Context } from '@temporalio/activity';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';

Runtime.install({ logger: new DefaultLogger('ERROR') });
const doc = JSON.parse(process.argv[2]);
const address = process.env.TEMPORAL_ADDRESS;
const bundle = await bundleWorkflowCode({
  workflowsPath: fileURLToPath(new URL('./workflows.mjs', import.meta.url)),
  logger: new DefaultLogger('ERROR'),
});
const taskQueue = `evaluator-${randomBytes(3).toString('hex')}`;
const activities = {
  // A long evaluation: it heartbeats until it is cancelled.
  async evaluateForever() {
    for (;;) {
      Context.current().heartbeat();
      await Context.current().sleep(200);
    }
  },
};
const connection = await NativeConnection.connect({ address });
const worker = await Worker.create({ connection, taskQueue, workflowBundle: bundle, activities });
const clientConnection = await Connection.connect({ address });
const client = new Client({ connection: clientConnection });
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
await clientConnection.close();
await connection.close();
