// spec.expiresAt as the workflow keeps it: one durable timer that deletes the model when it fires, replaced when an
// update moves the time; an update to a time already past is refused before it reaches history.
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { updateModelUpdate } from '../../../workflows/contract/index.js';
import { StubActivities } from '../../support/stub-activities.js';
import { useHarness } from '../../support/fixtures.js';
import { FAST, modelDoc, readyAt, waitForStatus, withWorker } from '../../support/workflow-harness.js';

const harness = useHarness();
const QUIET = { ...FAST, safetyNetIntervalMs: 3_600_000 };
const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString();

describe('ServeModelWorkflow expiry', () => {
  it('deletes the model when spec.expiresAt comes, after an update moved it once', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc((d) => (d.spec.expiresAt = inSeconds(3)));
      const handle = await start(doc, QUIET);
      const ready = await waitForStatus(handle, readyAt(1));
      expect(ready.expiresAt).toBe(doc.spec.expiresAt);

      // Moved later before it fires: the first time passes, the model serves on.
      const later = inSeconds(6);
      doc.spec.expiresAt = later;
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      await waitForStatus(handle, (s) => readyAt(2)(s) && s.expiresAt === later);
      await new Promise((resolve) => setTimeout(resolve, 3_500));
      expect(stub.callsOf('tearDown')).toHaveLength(0);

      // A time that has passed is refused: nothing of it reaches the model.
      doc.spec.expiresAt = inSeconds(-60);
      const refused = await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(WorkflowUpdateFailedError);
      expect(String((refused as WorkflowUpdateFailedError).cause?.message)).toMatch(/^spec\.expiresAt: is in the past/);

      const final = await handle.result();
      expect(final.reason).toBe(`expired (spec.expiresAt ${later})`);
      expect(final.status.phase).toBe('Deleted');
      expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(later));
      expect(stub.callsOf('tearDown')).toHaveLength(1);
      // One timer for each time it waited for, the first cancelled by the update (beside them, the safety net's hour).
      const events = (await handle.fetchHistory()).events!;
      const seconds = events
        .map((e) => Number(e.timerStartedEventAttributes?.startToFireTimeout?.seconds ?? -1))
        .filter((s) => s >= 0 && s < 3600);
      expect(seconds).toHaveLength(2);
      expect(events.filter((e) => e.timerCanceledEventAttributes).length).toBe(1);
    });
  });
});
