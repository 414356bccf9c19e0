import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { privateTemporal } from '../support/temporal-server.js';
import { workflowBundle } from '../support/workflow-harness.js';
import { counterWorkflow, countQuery, incrementSignal } from './fixtures/counter-workflow.js';

// A second dev server, so that restarting it does not disturb the other test files.
const temporal = privateTemporal(17233);

let bundle: WorkflowBundleWithSourceMap;

beforeAll(async () => {
  // Only errors: the SDK's worker-state lines would bury the test report.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  temporal.up();
  bundle = await workflowBundle(join(__dirname, 'fixtures/counter-workflow.ts'));
}, 180_000);

afterAll(() => temporal.remove());

async function withWorker<T>(taskQueue: string, fn: (client: Client) => Promise<T>): Promise<T> {
  const nativeConnection = await NativeConnection.connect({ address: temporal.address });
  const connection = await Connection.connect({ address: temporal.address });
  try {
    const worker = await Worker.create({ connection: nativeConnection, taskQueue, workflowBundle: bundle });
    return await worker.runUntil(fn(new Client({ connection })));
  } finally {
    await connection.close();
    await nativeConnection.close();
  }
}

describe('the Temporal dev server started by local:up', () => {
  it('runs a workflow that survives a restart of the server (SQLite persistence)', async () => {
    const taskQueue = `restart-${Date.now()}`;
    const workflowId = `counter-${Date.now()}`;
    const runId = await withWorker(taskQueue, async (client) => {
      const handle = await client.workflow.start(counterWorkflow, { taskQueue, workflowId, args: [2] });
      await handle.signal(incrementSignal);
      await expect.poll(() => handle.query(countQuery), { timeout: 20_000 }).toBe(1);
      return handle.firstExecutionRunId;
    });

    temporal.down();
    temporal.up();

    const result = await withWorker(taskQueue, async (client) => {
      const handle = client.workflow.getHandle(workflowId);
      expect((await handle.describe()).runId).toBe(runId);
      await handle.signal(incrementSignal);
      return handle.result();
    });
    expect(result).toBe(2);
  });
});
