import { ApplicationFailure, WorkflowUpdateFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { FAILURE, INVALID_SPEC, specQuery, statusQuery, updateModelUpdate } from '../../../workflows/contract/index.js';
import { failure, StubActivities } from '../../support/stub-activities.js';
import { useHarness } from '../../support/fixtures.js';
import {
  callsSince,
  modelDoc,
  readyAt,
  waitForStatus,
  withReadyModel,
  withWorker,
  type Doc,
  type ModelHandle,
} from '../../support/workflow-harness.js';

const harness = useHarness();

const update = (handle: ModelHandle, doc: Doc) => handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });

/** What an update that changes nothing returns. */
const unchanged = (generation: number) => ({
  accepted: true,
  generation,
  changed: false,
  sourceChanged: false,
  changes: [],
});

/** The rejection of an update, as the client sees it. */
async function rejection(promise: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await promise.then(
    () => expect.fail('the update was accepted'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
  const cause = (err as WorkflowUpdateFailedError).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  return cause as ApplicationFailure;
}

describe('ServeModelWorkflow updates', () => {
  it('rejects an invalid spec with one message per field, and a change of an immutable field, before history', async () => {
    const stub = new StubActivities();
    await withReadyModel(harness, stub, async ({ doc, handle }) => {
      const eventsBefore = (await handle.fetchHistory()).events?.length ?? 0;

      const invalid = await rejection(
        update(
          handle,
          modelDoc((d) => {
            d.spec.replicas = -1;
            d.spec.engine.port = 'http';
            d.spec.engine.argz = [];
          }, doc.metadata.name),
        ),
      );
      expect(invalid.type).toBe(INVALID_SPEC);
      expect(invalid.message.split('\n').sort()).toEqual([
        'spec.engine.argz: unknown field; did you mean "args"? fields allowed here: image, servedModelName, port, args, env, apiKeySecret, lora, startupTimeout',
        'spec.engine.port: must be a port number from 1 to 65535',
        'spec.replicas: must be 0 or more',
      ]);
      expect(invalid.details?.[0]).toContainEqual({ path: 'spec.replicas', message: 'must be 0 or more' });

      const immutable = await rejection(
        update(
          handle,
          modelDoc((d) => (d.spec.storage = { accessMode: 'ReadWriteMany' }), doc.metadata.name),
        ),
      );
      expect(immutable.type).toBe(INVALID_SPEC);
      expect(immutable.message).toMatch(
        /^spec\.storage\.accessMode: cannot change from "ReadWriteOnce" to "ReadWriteMany": Kubernetes cannot change the access mode/,
      );

      const status = await handle.query(statusQuery);
      expect(status).toMatchObject({ phase: 'Ready', generation: 1 });
      // Rejected in the validator: no trace in history.
      const events = (await handle.fetchHistory()).events ?? [];
      expect(events.slice(eventsBefore).some((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toBe(false);
    });
  });

  it('applies a change in place: new generation, engine only, no pull; the same document again is a no-op', async () => {
    const stub = new StubActivities();
    await withReadyModel(harness, stub, async ({ doc, handle }) => {
      const callsBefore = stub.calls.length;

      doc.spec.engine.args = ['--max-model-len=4096'];
      doc.spec.replicas = 2;
      const result = await update(handle, doc);
      expect(result).toEqual({
        accepted: true,
        generation: 2,
        changed: true,
        sourceChanged: false,
        changes: ['spec.engine.args', 'spec.replicas'],
      });
      const status = await waitForStatus(handle, readyAt(2));
      expect(callsSince(stub, callsBefore)).toEqual(['applyEngine', 'awaitRollout', 'awaitHealth']);
      expect(stub.callsOf('applyEngine').at(-1)!.input.model.spec.engine.args).toEqual(['--max-model-len=4096']);
      expect(status).toMatchObject({ replicas: 2, readyReplicas: 2, observedGeneration: 2 });
      expect(status.timeline.filter((e) => e.generation === 2).map((e) => `${e.step}:${e.outcome}`)).toEqual([
        'update:Succeeded',
        'rollout:Succeeded',
        'startup:Succeeded',
      ]);

      expect(await update(handle, doc)).toEqual(unchanged(2));
      expect((await handle.query(statusQuery)).generation).toBe(2);
      expect((await handle.query(specQuery)).spec).toMatchObject({
        replicas: 2,
        engine: { args: ['--max-model-len=4096'] },
      });
    });
  });

  it('on a new source scales the engine to 0 before the puller starts, then pulls, releases and rolls out', async () => {
    const stub = new StubActivities();
    await withReadyModel(harness, stub, async ({ doc, handle, ready: before }) => {
      const callsBefore = stub.calls.length;

      doc.spec.source.huggingface.revision = 'v2';
      const result = await update(handle, doc);
      expect(result).toMatchObject({
        generation: 2,
        sourceChanged: true,
        changes: ['spec.source.huggingface.revision'],
      });
      const status = await waitForStatus(handle, readyAt(2));

      expect(callsSince(stub, callsBefore)).toEqual([
        'claimName',
        'applyStorage',
        'scaleEngine',
        'startPuller',
        'awaitPuller',
        'releaseVolume',
        'applyEngine',
        'awaitRollout',
        'awaitHealth',
      ]);
      expect(stub.callsOf('scaleEngine')[0]!.input.replicas).toBe(0);
      expect(status.source).toBe('huggingface:Qwen/Qwen2.5-0.5B-Instruct@v2');
      expect(status.sourceHash).not.toBe(before.sourceHash);
      expect(stub.callsOf('releaseVolume').at(-1)!.input.sourceHash).toBe(status.sourceHash);
      expect(status.timeline.filter((e) => e.generation === 2).map((e) => e.step)).toEqual([
        'update',
        'claim',
        'storage',
        'stop',
        'download',
        'release',
        'rollout',
        'startup',
      ]);
    });
  });

  it('cancels a running download when an update arrives, then reconciles the new spec', async () => {
    const stub = new StubActivities();
    const gate = stub.gate('awaitPuller');
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc();
      const handle = await start(doc);
      const first = await gate.reached;

      doc.spec.source.huggingface.revision = 'v2';
      expect(await update(handle, doc)).toMatchObject({ generation: 2, sourceChanged: true });
      const status = await waitForStatus(handle, readyAt(2));

      await expect.poll(() => first.outcome).toBe('cancelled');
      const [abandoned, released] = stub.callsOf('releaseVolume');
      expect(abandoned!.input).toMatchObject({ jobName: (first.input as { jobName: string }).jobName, abandon: true });
      expect(released!.input.abandon).toBeUndefined();
      expect(stub.callsOf('startPuller').map((c) => c.input.model.spec.source.huggingface?.revision)).toEqual([
        'main',
        'v2',
      ]);
      expect(stub.callsOf('scaleEngine')).toEqual([]); // no engine existed yet
      expect(status.timeline.find((e) => e.step === 'download' && e.generation === 1)).toMatchObject({
        outcome: 'Cancelled',
        detail: 'superseded by generation 2',
      });
      expect(status.source).toBe('huggingface:Qwen/Qwen2.5-0.5B-Instruct@v2');
    });
  });

  it('retries a Failed model when sent the same document again', async () => {
    const stub = new StubActivities().throwOnce(
      'claimName',
      failure(FAILURE.NameConflict, 'Service models/x is not ours'),
    );
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc();
      const handle = await start(doc);
      await waitForStatus(handle, (s) => s.phase === 'Failed');
      // Someone removed the conflicting Service; the same spec now goes through.
      expect(await update(handle, doc)).toEqual(unchanged(2));
      const status = await waitForStatus(handle, readyAt(2));
      expect(stub.callsOf('claimName')).toHaveLength(2);
      expect(status.lastError).toBeUndefined();
    });
  });

  it('lets the latest of two updates win when the second arrives while the first is rolling out', async () => {
    const stub = new StubActivities();
    await withReadyModel(harness, stub, async ({ doc, handle }) => {
      const gate = stub.gate('awaitRollout');

      doc.spec.engine.args = ['--max-model-len=2048'];
      expect(await update(handle, doc)).toMatchObject({ generation: 2 });
      await gate.reached;
      doc.spec.engine.args = ['--max-model-len=8192'];
      expect(await update(handle, doc)).toMatchObject({ generation: 3 });

      const status = await waitForStatus(handle, readyAt(3));
      expect(status.observedGeneration).toBe(3);
      expect(stub.callsOf('applyEngine').map((c) => c.input.model.spec.engine.args)).toEqual([
        [],
        ['--max-model-len=2048'],
        ['--max-model-len=8192'],
      ]);
      expect(status.timeline.filter((e) => e.step === 'update').map((e) => `${e.generation}:${e.outcome}`)).toEqual([
        '2:Cancelled',
        '3:Succeeded',
      ]);
    });
  });
});
