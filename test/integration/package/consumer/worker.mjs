// What the consumer's programs share: a worker of this project's own, on a task queue of its own, running the
// workflows of workflows.mjs (bundled with the installed SDK, which refuses Node built-ins in workflow code), and a
// client on the local stack's Temporal.
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';

Runtime.install({ logger: new DefaultLogger('ERROR') });

export async function consumerWorker(prefix, activities = {}) {
  const address = process.env.TEMPORAL_ADDRESS;
  const bundle = await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('./workflows.mjs', import.meta.url)),
    logger: new DefaultLogger('ERROR'),
  });
  const taskQueue = `${prefix}-${randomBytes(3).toString('hex')}`;
  const connection = await NativeConnection.connect({ address });
  const worker = await Worker.create({ connection, taskQueue, workflowBundle: bundle, activities });
  const clientConnection = await Connection.connect({ address });
  return {
    bundle,
    taskQueue,
    worker,
    client: new Client({ connection: clientConnection }),
    async close() {
      await clientConnection.close();
      await connection.close();
    },
  };
}
