// A worker with stub activities in a process of its own, for tests that kill it (SIGKILL) the way a node loses a
// worker: it leaves its sticky queue behind, unlike a worker stopped in-process, which tells the server it is gone.
//
//   node --import tsx test/support/stub-worker-process.ts <temporal address> <task queue>
//
// Prints `polling` once it polls.
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { activityInterceptors } from '../../worker/create-worker.js';
import { StubActivities } from './stub-activities.js';
import { TEST_SINKS, workflowBundle } from './workflow-harness.js';

Runtime.install({ logger: new DefaultLogger('ERROR') });
const [address, taskQueue] = process.argv.slice(2);
if (!address || !taskQueue) throw new Error('usage: stub-worker-process.ts <temporal address> <task queue>');
const worker = await Worker.create({
  connection: await NativeConnection.connect({ address }),
  taskQueue,
  workflowBundle: await workflowBundle(),
  activities: new StubActivities().activities(),
  sinks: TEST_SINKS,
  interceptors: { activity: activityInterceptors() },
  maxHeartbeatThrottleInterval: '20ms',
  defaultHeartbeatThrottleInterval: '20ms',
  // The SDK's default, named: how long a task for this worker waits on its sticky queue once the worker is gone.
  stickyQueueScheduleToStartTimeout: '10s',
});
process.stdout.write('polling\n');
await worker.run();
