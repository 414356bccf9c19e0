import { describe, expect, it } from 'vitest';
import {
  deleteModelUpdate,
  modelChangedSignal,
  parseServedModel,
  scaleSignal,
  statusQuery,
  updateModelUpdate,
  workflowIdFor,
} from '../../../workflows/contract/index.js';
import { StubActivities } from '../../support/stub-activities.js';
import { useHarness } from '../../support/fixtures.js';
import {
  FAST,
  modelDoc,
  readyAt,
  startModel,
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

  it("keeps a tenant's model its own across runs: another tenant's update and delete find no such model", async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ client, taskQueue }) => {
      const doc = modelDoc();
      const spec = parseServedModel(doc);
      const options = { ...FAST, watchIntervalMs: 150, continueAsNewAfterEvents: 60 };
      const started = await startModel(client, taskQueue, spec, options, 'team-a');
      try {
        expect(await waitForStatus(started, readyAt(1))).toMatchObject({ tenant: 'team-a' });
        const handle: ModelHandle = client.workflow.getHandle(started.workflowId);
        const refusedToTeamB = async () => {
          const update = handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc, tenant: 'team-b' }] });
          await expect(update).rejects.toMatchObject({ cause: { type: 'ModelNotFound' } });
          const del = handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'mine', tenant: 'team-b' }] });
          await expect(del).rejects.toMatchObject({
            cause: {
              type: 'ModelNotFound',
              message: `${doc.metadata.name} (namespace models, cluster test): no such model`,
            },
          });
        };
        await refusedToTeamB();
        await expect
          .poll(async () => (await handle.describe()).runId, { timeout: 20_000, interval: 100 })
          .not.toBe(started.firstExecutionRunId);
        expect(await handle.query(statusQuery)).toMatchObject({ phase: 'Ready', tenant: 'team-a' });
        await refusedToTeamB();
        // Its owner and an admin (no tenant) may change it.
        doc.spec.replicas = 2;
        expect(
          await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc, tenant: 'team-a' }] }),
        ).toMatchObject({ generation: 2 });
        doc.spec.replicas = 3;
        expect(await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] })).toMatchObject({
          generation: 3,
        });
        expect(stub.callsOf('tearDown')).toHaveLength(0);
        // Each look carries the owner, so the worker checks the model against the tenant's grant as it is now.
        expect(stub.callsOf('lookAtModel').length).toBeGreaterThan(0);
        expect(stub.callsOf('lookAtModel').every((c) => c.input.tenant === 'team-a')).toBe(true);
      } finally {
        await started.terminate('test finished').catch(() => undefined);
      }
    });
  });

  it('carries a scale decision not yet applied into the next run, which applies it', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start, client }) => {
      const doc = modelDoc((d) => (d.spec.scaling = { minReplicas: 1, maxReplicas: 4, targetConcurrency: 2 }));
      const options = { ...FAST, safetyNetIntervalMs: 3_600_000, continueAsNewAfterEvents: 150 };
      const started = await start(doc, options);
      await waitForStatus(started, readyAt(1));
      const handle: ModelHandle = client.workflow.getHandle(started.workflowId);
      // A look held open; meanwhile wakes push the history past the bound, and a decision arrives. When the look ends,
      // the run continues as new before it is idle again: the decision must go with it.
      const look = stub.gate('lookAtModel');
      await handle.signal(modelChangedSignal, { objects: ['Deployment/x'] });
      await look.reached;
      for (let length = 0; length <= options.continueAsNewAfterEvents;) {
        await handle.signal(modelChangedSignal, { objects: ['Deployment/x'] });
        length = (await handle.describe()).historyLength;
      }
      await handle.signal(scaleSignal, { replicas: 3, from: 1, reason: 'load 6 over target 2 held 15s' });
      look.release();
      await expect
        .poll(async () => (await handle.describe()).runId, { timeout: 20_000, interval: 100 })
        .not.toBe(started.firstExecutionRunId);
      const out = await waitForStatus(handle, (s) => s.scaling?.replicas === 3);
      expect(stub.callsOf('scaleEngine').map((c) => c.input.replicas)).toEqual([3]);
      expect(out.scaling?.lastDecision).toMatchObject({ from: 1, to: 3, reason: 'load 6 over target 2 held 15s' });
      // Applied by the new run, once: the first run's history has no scaleEngine.
      const first = await client.workflow.getHandle(started.workflowId, started.firstExecutionRunId).fetchHistory();
      const scheduled = (first.events ?? []).filter((e) => e.activityTaskScheduledEventAttributes);
      expect(scheduled.map((e) => e.activityTaskScheduledEventAttributes!.activityType!.name)).not.toContain(
        'scaleEngine',
      );
      await handle.executeUpdate(deleteModelUpdate, { args: [{ reason: 'done' }] });
    });
  });
});
