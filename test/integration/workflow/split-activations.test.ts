// A watch's wake and an update that Temporal's SDK runs in two activations live and in one on replay. After a worker
// is lost, a query that reaches the new worker before the next workflow task is answered by replaying the history,
// and that replay runs the handler of a signal recorded after the last task (here the watch's `modelChanged`): the
// workflow schedules a look there. The next task brings an update, which cancels that look before it was ever sent.
// A later replay sees the signal and the update in one activation and never schedules the look. With the SDK's
// default activity IDs (a sequence number each) the update's first activity was then numbered one lower than history
// says — `[TMPRL1100] Nondeterminism error: Activity id of scheduled event '10' does not match activity id of activity
// command '9'` — and the model's workflow was stuck on every worker (found by the chaos suite;
// test/histories/upstream/update-after-lost-workflow-task.json). Runs since the `split-activation-safe` patch name
// their activities after what they are for (workflows/activity-options.ts, `ActivityIds`), so both ways agree.
//
// The order is forced with the sticky queue's timeout (10 s): the query, sent first, leaves the dead worker's sticky
// queue for the new worker two seconds before the workflow task that carries the signal and the update does.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { updateModel } from '../../../client/update-model.js';
import { activityInterceptors } from '../../../worker/create-worker.js';
import { modelChangedSignal, parseServedModel, statusQuery } from '../../../workflows/contract/index.js';
import { useHarness } from '../../support/fixtures.js';
import { writeHistory } from '../../support/history-files.js';
import { readLocalEnv, repoRoot } from '../../support/local-env.js';
import { StubActivities } from '../../support/stub-activities.js';
import { FAST, modelDoc, readyAt, startModel, TEST_SINKS, waitForStatus } from '../../support/workflow-harness.js';

const harness = useHarness();

/** Looks come from wakes alone (the safety net is an hour away). */
const QUIET = { ...FAST, safetyNetIntervalMs: 3_600_000 };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a wake and an update split into two activations by a query', () => {
  it('run after a lost worker, the history replays', { timeout: 120_000 }, async () => {
    const taskQueue = `split-${randomBytes(5).toString('hex')}`;
    const address = process.env.TEMPORAL_ADDRESS ?? readLocalEnv().TEMPORAL_ADDRESS;
    const lost = spawn(
      process.execPath,
      ['--import', 'tsx', join(repoRoot, 'test/support/stub-worker-process.ts'), address, taskQueue],
      { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const exited = new Promise((resolve) => lost.on('exit', resolve));
    try {
      await new Promise<void>((resolve, reject) => {
        lost.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('polling') && resolve());
        lost.on('exit', (code) => reject(new Error(`the stub worker exited (${code}) before it polled`)));
      });
      const doc = modelDoc();
      const handle = await startModel(harness.client, taskQueue, parseServedModel(doc), QUIET);
      await waitForStatus(handle, readyAt(1));
      lost.kill('SIGKILL');
      await exited;

      const stub = new StubActivities();
      const worker = await Worker.create({
        connection: harness.connection,
        taskQueue,
        workflowBundle: harness.bundle,
        activities: stub.activities(),
        sinks: TEST_SINKS,
        interceptors: { activity: activityInterceptors() },
        shutdownGraceTime: '200ms',
      });
      const running = worker.run();
      try {
        // Waits on the lost worker's sticky queue, then is answered by the new worker from the history.
        const answered = handle.query(statusQuery);
        await sleep(2_000);
        const next = structuredClone(doc);
        next.spec.engine.args = ['--max-model-len=2048'];
        const updated = updateModel(harness.client, next);
        await sleep(300);
        await handle.signal(modelChangedSignal, { objects: [`Pod/${doc.metadata.name}-a`] });

        // The query ran on the history with the signal and without the update: the split.
        const seen = await answered;
        expect({ phase: seen.phase, generation: seen.generation }).toEqual({ phase: 'Ready', generation: 1 });
        expect(await updated).toMatchObject({ accepted: true, generation: 2 });
        await waitForStatus(handle, readyAt(2));
      } finally {
        worker.shutdown();
        await running;
      }

      const history = await handle.fetchHistory();
      const events = history.events!;
      const wakes = events.flatMap((e, i) =>
        e.workflowExecutionSignaledEventAttributes?.signalName === modelChangedSignal.name ? [i] : [],
      );
      const signalled = wakes.at(-1)!;
      const accepted = events.findIndex((e) => e.workflowExecutionUpdateAcceptedEventAttributes);
      // The update came in the task after the signal, and the look the signal asked for was never sent.
      expect(accepted).toBeGreaterThan(signalled);
      const between = events.slice(signalled, accepted);
      expect(between.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
      const scheduled = events
        .slice(accepted)
        .map((e) => e.activityTaskScheduledEventAttributes)
        .filter((a) => a !== undefined && a !== null);
      expect(scheduled[0]).toMatchObject({ activityType: { name: 'applyEngine' }, activityId: 'applyEngine/2/1' });
      expect(stub.callsOf('lookAtModel')).toEqual([]);

      if (process.env.FERRY_RECORD_HISTORY) writeHistory(process.env.FERRY_RECORD_HISTORY, history);
      await expect(
        Worker.runReplayHistory({ workflowBundle: harness.bundle, sinks: TEST_SINKS }, history, handle.workflowId),
      ).resolves.toBeUndefined();
      await handle.terminate('test finished');
    } finally {
      lost.kill('SIGKILL');
    }
  });
});
