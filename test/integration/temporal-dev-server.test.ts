import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import {
  bundleWorkflowCode,
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/local-env';
import { counterWorkflow, countQuery, incrementSignal } from './fixtures/counter-workflow';

// A second dev server, started and stopped by the same scripts as the main one but with its own run directory
// and ports, so restarting it does not disturb the other test files.
const runDir = mkdtempSync(join(tmpdir(), 'ferry-temporal-restart-'));
const port = 17233;
const env = {
  ...process.env,
  FERRY_RUN_DIR: runDir,
  FERRY_TEMPORAL_PORT: String(port),
  FERRY_TEMPORAL_UI_PORT: String(port + 1),
  FERRY_TEMPORAL_HTTP_PORT: String(port + 2),
  FERRY_TEMPORAL_METRICS_PORT: String(port + 3),
};
const script = (name: string, ...args: string[]): string =>
  execFileSync('bash', [join(repoRoot, 'deploy/local', name), ...args], { env, encoding: 'utf8', stdio: 'pipe' });

let bundle: WorkflowBundleWithSourceMap;

beforeAll(async () => {
  // Only errors: the SDK's worker-state lines would bury the test report.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  script('up.sh', 'temporal');
  bundle = await bundleWorkflowCode({
    workflowsPath: join(__dirname, 'fixtures/counter-workflow.ts'),
    logger: new DefaultLogger('ERROR'),
  });
}, 180_000);

afterAll(() => {
  script('down.sh', 'temporal');
  rmSync(runDir, { recursive: true, force: true });
});

async function withWorker<T>(taskQueue: string, fn: (client: Client) => Promise<T>): Promise<T> {
  const nativeConnection = await NativeConnection.connect({ address: `127.0.0.1:${port}` });
  const connection = await Connection.connect({ address: `127.0.0.1:${port}` });
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

    script('down.sh', 'temporal');
    script('up.sh', 'temporal');

    const result = await withWorker(taskQueue, async (client) => {
      const handle = client.workflow.getHandle(workflowId);
      expect((await handle.describe()).runId).toBe(runId);
      await handle.signal(incrementSignal);
      return handle.result();
    });
    expect(result).toBe(2);
  });
});
