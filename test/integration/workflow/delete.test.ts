import { CancelledFailure, WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import {
  deleteModelUpdate,
  FAILURE,
  MODEL_DELETING,
  statusQuery,
  updateModelUpdate,
} from '../../../workflows/contract/index.js';
import { failure, StubActivities, transient } from '../../support/stub-activities.js';
import { useHarness } from '../../support/fixtures.js';
import {
  modelDoc,
  phaseIs,
  phasesFromHistory,
  waitForStatus,
  withReadyModel,
  withWorker,
} from '../../support/workflow-harness.js';

const harness = useHarness();

describe('ServeModelWorkflow deletion', () => {
  it('deletes during a rollout: cancels the wait, tears down, returns what was deleted, completes', async () => {
    const stub = new StubActivities();
    const gate = stub.gate('awaitRollout');
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc();
      const handle = await start(doc);
      const rollout = await gate.reached;

      const result = await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'evaluation finished' }] });
      const name = doc.metadata.name;
      expect(result).toEqual({
        deleted: [`Deployment/${name}`, `Service/${name}`, `PersistentVolumeClaim/${name}-weights`],
        retained: [],
        reason: 'evaluation finished',
        attempts: 1,
      });

      const final = await handle.result();
      expect(final.reason).toBe('evaluation finished');
      expect(final.teardown.deleted).toEqual(result.deleted);
      expect(final.status.phase).toBe('Deleted');
      expect(final.status.timeline.find((e) => e.step === 'rollout')).toMatchObject({ outcome: 'Cancelled' });
      expect(final.status.timeline.at(-1)).toMatchObject({
        step: 'teardown',
        outcome: 'Succeeded',
        detail: 'deleted 3 object(s) (evaluation finished)',
      });
      await expect.poll(() => rollout.outcome).toBe('cancelled');
      expect(stub.callsOf('tearDown')).toHaveLength(1);
      expect(stub.names()).not.toContain('awaitHealth');
      expect((await phasesFromHistory(handle)).slice(-3)).toEqual(['Starting', 'Deleting', 'Deleted']);
    });
  });

  it('deletes a model that never became Ready (Failed), keeping a retained volume', async () => {
    const stub = new StubActivities().throwOnce(
      'claimName',
      failure(FAILURE.NameConflict, 'Service models/x exists and is not managed by ferry'),
    );
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc((d) => (d.spec.storage = { retainOnDelete: true }));
      const handle = await start(doc);
      const failed = await waitForStatus(handle, phaseIs('Failed'));
      expect(failed.lastError).toMatchObject({ reason: 'NameConflict', step: 'claim' });

      const result = await handle.executeUpdate(deleteModelUpdate, { args: [{}] });
      expect(result.retained).toEqual([`PersistentVolumeClaim/${doc.metadata.name}-weights`]);
      const final = await handle.result();
      expect(final.status.phase).toBe('Deleted');
      expect(final.status.lastError).toBeUndefined();
      expect(final.teardown.retained).toEqual(result.retained);
    });
  });

  it('tears down when the workflow is cancelled, and ends as cancelled', async () => {
    const stub = new StubActivities();
    await withReadyModel(harness, stub, async ({ handle }) => {
      await handle.cancel();
      const err = await handle.result().then(
        () => expect.fail('a cancelled workflow has no result'),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(WorkflowFailedError);
      expect((err as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
      expect(stub.callsOf('tearDown')).toHaveLength(1);
      const status = await handle.query(statusQuery);
      expect(status.phase).toBe('Deleted');
      expect(status.timeline.at(-1)).toMatchObject({
        step: 'teardown',
        outcome: 'Succeeded',
        detail: 'deleted 3 object(s) (workflow cancelled)',
      });
    });
  });

  it('retries an incomplete teardown until done, showing it in status; updates are refused meanwhile', async () => {
    const stub = new StubActivities();
    stub.throwOnce('tearDown', transient(FAILURE.TeardownIncomplete, 'Deployment/x: etcdserver: request timed out'));
    const gate = stub.gate('tearDown');
    await withReadyModel(harness, stub, async ({ doc, handle }) => {
      const deleting = handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'done' }] });
      await gate.reached;
      const status = await handle.query(statusQuery);
      expect(status.phase).toBe('Deleting');
      expect(status.lastError).toMatchObject({
        reason: 'TeardownIncomplete',
        message: 'Deployment/x: etcdserver: request timed out',
        step: 'teardown',
      });

      doc.spec.replicas = 3;
      const refused = await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(WorkflowUpdateFailedError);
      expect((refused as WorkflowUpdateFailedError).cause).toMatchObject({ type: MODEL_DELETING });

      // A second delete waits for the same teardown.
      const again = handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'again' }] });
      gate.release();
      const [first, second] = await Promise.all([deleting, again]);
      expect(first).toMatchObject({ attempts: 2, reason: 'done' });
      expect(second).toEqual(first);
      const final = await handle.result();
      expect(final.status.lastError).toBeUndefined();
      expect(final.status.timeline.at(-1)).toMatchObject({
        step: 'teardown',
        detail: 'deleted 3 object(s) after 2 attempts (done)',
      });
    });
  });

  it("a move's delete says where the model serves now, while it is torn down and after; a later delete changes nothing", async () => {
    const stub = new StubActivities();
    const gate = stub.gate('tearDown');
    await withReadyModel(harness, stub, async ({ handle }) => {
      const movedTo = { cluster: 'east', endpoint: 'http://east.example:8000/v1', move: 'move/models/x' };
      const deleting = handle.executeUpdate(deleteModelUpdate, {
        args: [{ reason: 'moved to cluster east', movedTo }],
      });
      await gate.reached;
      const during = await handle.query(statusQuery);
      expect(during).toMatchObject({ phase: 'Deleting', movedTo });
      // The switch is the first delete's: another one, with or without a move, keeps it.
      const other = handle.executeUpdate(deleteModelUpdate, {
        args: [{ movedTo: { cluster: 'west', move: 'move/models/y' } }],
      });
      gate.release();
      await Promise.all([deleting, other]);
      const final = await handle.result();
      expect(final.status).toMatchObject({ phase: 'Deleted', movedTo: { ...movedTo, at: during.movedTo!.at } });
    });
  });
});
