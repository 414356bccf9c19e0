import { describe, expect, it } from 'vitest';
import { deleteModelUpdate, statusQuery, updateModelUpdate, workflowIdFor } from '../../../workflows/contract/index.js';
import { StubActivities } from '../../support/stub-activities.js';
import { useHarness } from '../../support/fixtures.js';
import {
  FAST,
  modelDoc,
  readyAt,
  waitForStatus,
  withWorker,
  type ModelHandle,
} from '../../support/workflow-harness.js';

const harness = useHarness();

describe('ServeModelWorkflow continue-as-new', () => {
  it('continues as new while Ready and keeps status, generation and messages working on the new run', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start, client }) => {
      const doc = modelDoc();
      const started = await start(doc, { ...FAST, watchIntervalMs: 150, continueAsNewAfterEvents: 60 });
      const before = await waitForStatus(started, readyAt(1));
      // Messages go to the workflow ID, so they reach whichever run is current.
      const handle: ModelHandle = client.workflow.getHandle(
        workflowIdFor({ cluster: 'test', namespace: 'models', name: doc.metadata.name }),
      );

      await expect
        .poll(async () => (await handle.describe()).runId, { timeout: 20_000, interval: 100 })
        .not.toBe(started.firstExecutionRunId);
      const carried = await handle.query(statusQuery);
      expect(carried).toMatchObject({
        phase: 'Ready',
        generation: 1,
        observedGeneration: 1,
        endpoint: before.endpoint,
      });
      expect(carried.timeline).toEqual(before.timeline);
      expect(carried.startedAt).toBe(before.startedAt);

      doc.spec.engine.args = ['--max-model-len=4096'];
      expect(await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] })).toMatchObject({ generation: 2 });
      const updated = await waitForStatus(handle, readyAt(2));
      expect(updated.timeline.map((e) => e.step)).toEqual([
        ...before.timeline.map((e) => e.step),
        'update',
        'rollout',
        'startup',
      ]);
      // The in-place update needed no new weights: the new run knew what the volume holds.
      expect(stub.callsOf('startPuller')).toHaveLength(1);

      const result = await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'done' }] });
      expect(result.attempts).toBe(1);
      const final = await handle.result();
      expect(final.status).toMatchObject({ phase: 'Deleted', generation: 2, observedGeneration: 2 });
    });
  });
});
