// Bundles workflows.mjs with the installed SDK (the bundler refuses Node built-ins in workflow code), reports what
// the bundle contains, and runs serveThenDelete(doc) on a task queue of this program's own.
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';

Runtime.install({ logger: new DefaultLogger('ERROR') });
const doc = JSON.parse(process.argv[2]);
const address = process.env.TEMPORAL_ADDRESS;
const bundle = await bundleWorkflowCode({
  workflowsPath: fileURLToPath(new URL('./workflows.mjs', import.meta.url)),
  logger: new DefaultLogger('ERROR'),
});
const taskQueue = `consumer-${randomBytes(3).toString('hex')}`;
const connection = await NativeConnection.connect({ address });
const worker = await Worker.create({ connection, taskQueue, workflowBundle: bundle });
const clientConnection = await Connection.connect({ address });
const client = new Client({ connection: clientConnection });
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
await clientConnection.close();
await connection.close();
