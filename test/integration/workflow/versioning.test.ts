// Worker Versioning on the dev server: a model served by one version of the worker moves to the next when that one is
// made current — woken by the new version's keeper, by continue-as-new, with no activity and a handful of events — and
// the new version alone takes its updates afterwards.
import { randomBytes } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { afterEach, describe, expect, it } from 'vitest';
import {
  parseServedModel,
  statusQuery,
  updateModelUpdate,
  type ServeModelOptions,
} from '../../../workflows/contract/index.js';
import { activityInterceptors } from '../../../worker/create-worker.js';
import { keepVersion } from '../../../worker/versioning.js';
import { useHarness } from '../../support/fixtures.js';
import { runWorkerCommand } from '../../support/ferry-worker.js';
import { StubActivities } from '../../support/stub-activities.js';
import {
  FAST,
  modelDoc,
  readyAt,
  startModel,
  TEST_SINKS,
  waitForStatus,
  type ModelHandle,
} from '../../support/workflow-harness.js';

const harness = useHarness();
const QUIET = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
/** No look of its own for an hour: the model moves only when the new version's keeper wakes it. */
const IDLE: ServeModelOptions = { ...FAST, watchIntervalMs: 3_600_000, safetyNetIntervalMs: 3_600_000 };

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A worker of `buildId` in `deploymentName` with the stub's activities, and its version keeper; stopped after the test. */
async function startVersion(deploymentName: string, taskQueue: string, buildId: string, stub: StubActivities) {
  const worker = await Worker.create({
    connection: harness.connection,
    taskQueue,
    workflowBundle: harness.bundle,
    activities: stub.activities(),
    sinks: TEST_SINKS,
    interceptors: { activity: activityInterceptors() },
    shutdownGraceTime: '200ms',
    workerDeploymentOptions: {
      version: { deploymentName, buildId },
      useWorkerVersioning: true,
      defaultVersioningBehavior: 'PINNED',
    },
  });
  const running = worker.run();
  // A switch the server still reports in progress after 15 s is taken as done (temporalio/temporal#11842), and a run
  // woken before the switch reached it is woken again 10 s later: a loaded machine's slow paths, kept short.
  const keeper = keepVersion(harness.client, 'default', { deploymentName, buildId }, QUIET, {
    intervalMs: 500,
    stuckPropagationMs: 15_000,
    rewakeAfterMs: 10_000,
  });
  const stop = async () => {
    keeper.stop();
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await running;
  };
  cleanups.push(stop);
  return { worker, stop };
}

/** The build ID a run is pinned to. */
async function pinnedTo(handle: ModelHandle): Promise<string | undefined> {
  const described = await handle.describe();
  return described.raw.workflowExecutionInfo?.versioningInfo?.deploymentVersion?.buildId ?? undefined;
}

describe('Worker Versioning', () => {
  it('moves a Ready model onto the new current version by continue-as-new, with no activity', async () => {
    const id = randomBytes(4).toString('hex');
    const deploymentName = `ferry-test-${id}`;
    const taskQueue = `ferry-test-${id}`;
    const stub = new StubActivities();
    const v1 = await startVersion(deploymentName, taskQueue, '0.1.0-aaaa', stub);

    // The first version's keeper makes it current (the deployment had none), so the model starts there.
    const doc = modelDoc();
    const started = await startModel(harness.client, taskQueue, parseServedModel(doc), IDLE);
    const ready = await waitForStatus(started, readyAt(1), 30_000);
    const handle: ModelHandle = harness.client.workflow.getHandle(started.workflowId);
    expect(await pinnedTo(handle)).toBe('0.1.0-aaaa');
    const callsBefore = stub.names();

    // The replay gate leaves the pinned run out: it moves by continue-as-new, not by replay.
    const gate = await runWorkerCommand(['--cluster', `test-${id}`, '--replay-check-open']);
    expect(gate.stdout).toContain('0 replayed, 0 failed; 1 pinned to their version, not replayed here');
    expect(gate.code).toBe(0);

    await startVersion(deploymentName, taskQueue, '0.2.0-bbbb', stub);
    const made = await runWorkerCommand([
      '--cluster',
      `test-${id}`,
      '--worker-versioning',
      'on',
      '--build-id',
      '0.2.0-bbbb',
      '--make-current',
    ]);
    expect(made.stdout).toBe(`${deploymentName}: 0.2.0-bbbb is the current version\n`);
    expect(made.code).toBe(0);

    // The new version's keeper wakes the run pinned to the old one; the run continues as new onto the new version.
    await expect.poll(() => pinnedTo(handle), { timeout: 90_000, interval: 250 }).toBe('0.2.0-bbbb');
    const moved = await handle.describe();
    expect(moved.runId).not.toBe(started.firstExecutionRunId);
    expect(await handle.query(statusQuery)).toMatchObject({
      phase: 'Ready',
      generation: 1,
      endpoint: ready.endpoint,
      startedAt: ready.startedAt,
    });
    const oldEvents = (
      await harness.client.workflow.getHandle(started.workflowId, started.firstExecutionRunId).fetchHistory()
    ).events!;
    const newEvents = (await handle.fetchHistory()).events!;
    const types = `old run ${oldEvents.map((e) => e.eventType).join(',')}; new run ${newEvents.map((e) => e.eventType).join(',')}`;
    // No activity ran for the move: no engine touched. A run woken before the switch reached its task queue (a loaded
    // server propagates slowly) looks once, as any wake does, on the old version, and is woken again: a look a wake.
    const wakes = oldEvents.filter((e) => e.workflowExecutionSignaledEventAttributes).length;
    const extraCalls = stub.names().slice(callsBefore.length);
    expect(stub.names().slice(0, callsBefore.length), types).toEqual(callsBefore);
    expect(
      extraCalls.filter((name) => name !== 'lookAtModel'),
      types,
    ).toEqual([]);
    expect(extraCalls.length, types).toBeLessThanOrEqual(wakes - 1);

    // What the move cost in history: the old run's events from the wake on, and the new run's so far.
    const wake = oldEvents.findIndex((e) => e.workflowExecutionSignaledEventAttributes);
    expect(wake).toBeGreaterThan(0);
    expect(oldEvents.at(-1)?.workflowExecutionContinuedAsNewEventAttributes).toBeTruthy();
    // The old run: the wake's task and the continue-as-new (and, woken early, a wake and a look more: 10 events); the
    // new run: its start, first task and safety-net timer. No patch marker and no search attribute written: the run is
    // pinned, and continue-as-new copied them.
    expect(oldEvents.length - wake + newEvents.length, types).toBeLessThanOrEqual(10 + 10 * (wakes - 1));
    expect(
      newEvents.filter((e) => e.markerRecordedEventAttributes ?? e.upsertWorkflowSearchAttributesEventAttributes),
    ).toEqual([]);
    expect((await handle.describe()).searchAttributes).toMatchObject({
      FerryModel: [doc.metadata.name],
      FerryPhase: ['Ready'],
    });

    // The old version may go: the new one alone takes the model's update.
    await v1.stop();
    doc.spec.engine.args = ['--max-model-len=4096'];
    await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
    await waitForStatus(handle, readyAt(2), 30_000);
    expect(await pinnedTo(handle)).toBe('0.2.0-bbbb');

    // Both runs replay on this code: a pinned run's branches follow the version recorded with each of its tasks.
    for (const runId of [started.firstExecutionRunId, (await handle.describe()).runId]) {
      const history = await harness.client.workflow.getHandle(started.workflowId, runId).fetchHistory();
      await Worker.runReplayHistory({ workflowBundle: harness.bundle, sinks: TEST_SINKS }, history, started.workflowId);
    }
    await handle.terminate('test finished');
  });
});
