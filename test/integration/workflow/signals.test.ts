// Changes by signal (`update`, `delete`) and Signal-With-Start, for clients that cannot send an Update: the same change
// as the Update when valid; when not, the model stays as it was and its status says why. Their histories replay.
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { WorkflowFailedError } from '@temporalio/client';
import proto from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import {
  deleteModelSignal,
  searchAttributesFor,
  statusQuery,
  updateModelSignal,
  workflowIdFor,
  type ModelStatus,
} from '../../../workflows/contract/index.js';
import { ServeModelWorkflow } from '../../../workflows/serve-model.js';
import { StubActivities } from '../../support/stub-activities.js';
import { useHarness } from '../../support/fixtures.js';
import { readLocalEnv } from '../../support/local-env.js';
import {
  FAST,
  callsSince,
  modelDoc,
  readyAt,
  TEST_SINKS,
  waitForStatus,
  withReadyModel,
  withWorker,
  type Doc,
  type ModelHandle,
} from '../../support/workflow-harness.js';

const harness = useHarness();
const EventType = proto.temporal.api.enums.v1.EventType;

const refusedEntries = (status: ModelStatus) =>
  status.timeline.filter((e) => e.step === 'update' && e.outcome === 'Failed');

async function replays(handle: ModelHandle): Promise<void> {
  const history = await handle.fetchHistory();
  await Worker.runReplayHistory({ workflowBundle: harness.bundle, sinks: TEST_SINKS }, history, handle.workflowId);
}

describe('ServeModelWorkflow changes by signal', () => {
  it('applies an update signal like the Update; the same document signalled again changes nothing', async () => {
    const stub = new StubActivities();
    await withReadyModel(harness, stub, async ({ doc, handle }) => {
      const callsBefore = stub.calls.length;
      doc.spec.engine.args = ['--max-model-len=4096'];
      await handle.signal(updateModelSignal, { spec: doc });
      const status = await waitForStatus(handle, readyAt(2));
      expect(callsSince(stub, callsBefore)).toEqual(['applyEngine', 'awaitRollout', 'awaitHealth']);
      expect(stub.callsOf('applyEngine').at(-1)!.input.model.spec.engine.args).toEqual(['--max-model-len=4096']);
      expect(status.timeline.filter((e) => e.generation === 2).map((e) => `${e.step}:${e.outcome}`)).toEqual([
        'update:Succeeded',
        'rollout:Succeeded',
        'startup:Succeeded',
      ]);

      await handle.signal(updateModelSignal, { spec: doc });
      // Signals are handled in the order they came: once a refused one after it shows, the second has been handled.
      await handle.signal(updateModelSignal, { model: doc } as never);
      await waitForStatus(handle, (s) => refusedEntries(s).length === 1);
      const after = await handle.query(statusQuery);
      expect(after).toMatchObject({ phase: 'Ready', generation: 2, observedGeneration: 2 });
      expect(callsSince(stub, callsBefore)).toHaveLength(3);
      await replays(handle);
    });
  });

  it('refuses an invalid spec and a change of an immutable field: the model stays as it was, and says why', async () => {
    const stub = new StubActivities();
    await withReadyModel(harness, stub, async ({ doc, handle }) => {
      const callsBefore = stub.calls.length;
      await handle.signal(updateModelSignal, { spec: { ...doc, spec: { ...doc.spec, replicas: -1 } } });
      const refused = await waitForStatus(handle, (s) => refusedEntries(s).length === 1);
      expect(refused).toMatchObject({
        phase: 'Ready',
        generation: 1,
        observedGeneration: 1,
        lastError: {
          reason: 'InvalidSpec',
          step: 'update',
          generation: 1,
          refused: 'update',
          message: expect.stringMatching(/^spec\.replicas: /) as string,
        },
      });
      expect(refusedEntries(refused)[0]!.detail).toMatch(/^update by signal refused: InvalidSpec: spec\.replicas: /);

      const moved: Doc = { ...doc, spec: { ...doc.spec, storage: { accessMode: 'ReadWriteMany' } } };
      await handle.signal(updateModelSignal, { spec: moved });
      const again = await waitForStatus(handle, (s) => refusedEntries(s).length === 2);
      expect(again.lastError?.message).toMatch(/^spec\.storage\.accessMode: cannot change from "ReadWriteOnce"/);
      expect(again).toMatchObject({ phase: 'Ready', generation: 1 });

      // Not { spec }: refused without asking the worker.
      await handle.signal(updateModelSignal, { model: doc } as never);
      const shape = await waitForStatus(handle, (s) => refusedEntries(s).length === 3);
      expect(shape.lastError?.message).toBe('the update needs { spec: <ServedModel document> }');

      expect(callsSince(stub, callsBefore)).toEqual([]);
      expect((await handle.query(statusQuery)).generation).toBe(1);
      await replays(handle);
    });
  });

  it('replays a signalled image a history accepted before the reference grammar, and refuses one now', async () => {
    const stub = new StubActivities();
    await withReadyModel(harness, stub, async ({ doc, handle }) => {
      // A history recorded before the grammar, when such an image was accepted: this run, its accepted signal's
      // image made one the grammar refuses. It replays accepted (the `spec-bounds-signalled` patch); tried: without
      // the patch, the replay refuses it and fails.
      const image = (value: string) => ({ spec: { ...doc, spec: { ...doc.spec, engine: { image: value } } } });
      await handle.signal(updateModelSignal, image('vllm/vllm-openai:v1'));
      await waitForStatus(handle, readyAt(2));
      const history = await handle.fetchHistory();
      const signal = history.events!.find((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'update');
      const payload = signal!.workflowExecutionSignaledEventAttributes!.input!.payloads![0]!;
      const input = JSON.parse(Buffer.from(payload.data!).toString('utf8')) as { spec: Doc };
      input.spec.spec.engine.image = 'vllm/vllm-öpenai:v1';
      payload.data = Buffer.from(JSON.stringify(input));
      await Worker.runReplayHistory({ workflowBundle: harness.bundle, sinks: TEST_SINKS }, history, handle.workflowId);

      await handle.signal(updateModelSignal, image('vllm/vllm-öpenai:v2'));
      const refused = await waitForStatus(handle, (s) => refusedEntries(s).length === 1);
      expect(refused).toMatchObject({ generation: 2, lastError: { reason: 'InvalidSpec', refused: 'update' } });
      expect(refused.lastError?.message).toMatch(/^spec\.engine\.image: must be an image reference like /);
      await replays(handle);
    });
  });

  it('costs a quiet Ready model 4 history events: the signal and the workflow task that handles it', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc();
      // Nothing else wakes the model while the signals are counted: no look for an hour.
      const handle = await start(doc, { ...FAST, safetyNetIntervalMs: 3_600_000 });
      await waitForStatus(handle, readyAt(1));
      const invalid = { spec: { ...doc, spec: { ...doc.spec, replicas: -1 } } };
      const eventsOfSignal = async (refusals: number) => {
        const before = (await handle.fetchHistory()).events!.length;
        await handle.signal(updateModelSignal, invalid);
        await waitForStatus(handle, (s) => refusedEntries(s).length === refusals);
        return (await handle.fetchHistory()).events!.slice(before).map((e) => EventType[e.eventType!]);
      };
      const task = ['WORKFLOW_TASK_SCHEDULED', 'WORKFLOW_TASK_STARTED', 'WORKFLOW_TASK_COMPLETED'].map(
        (t) => `EVENT_TYPE_${t}`,
      );
      // The run's first signal also records the signalled-changes patch (a marker and its search attribute), as an
      // unversioned worker does for every patch (none on a versioned one).
      expect(await eventsOfSignal(1)).toEqual([
        'EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED',
        ...task,
        'EVENT_TYPE_MARKER_RECORDED',
        'EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
      ]);
      expect(await eventsOfSignal(2)).toEqual(['EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED', ...task]);
    });
  });

  it('deletes by signal; a second delete and an update while it tears down change nothing', async () => {
    const stub = new StubActivities();
    const teardown = stub.gate('tearDown');
    await withReadyModel(harness, stub, async ({ doc, handle }) => {
      await handle.signal(deleteModelSignal, { reason: 'evaluation finished' });
      await teardown.reached;
      await handle.signal(deleteModelSignal, {});
      doc.spec.replicas = 3;
      await handle.signal(updateModelSignal, { spec: doc });
      const deleting = await waitForStatus(handle, (s) => refusedEntries(s).length === 1);
      expect(deleting).toMatchObject({ phase: 'Deleting', lastError: { reason: 'ModelDeleting', refused: 'update' } });
      teardown.release();
      const final = await handle.result();
      expect(final).toMatchObject({ reason: 'evaluation finished', status: { phase: 'Deleted', generation: 1 } });
      expect(stub.callsOf('tearDown')).toHaveLength(1);
      await replays(handle);
    });
  });

  it("takes a delete signal's movedTo into status, as the delete Update's, and drops one that is not well formed", async () => {
    // A move whose source's worker was gone sends its delete so (client/serving-activities.ts).
    const movedTo = { cluster: 'west', endpoint: 'http://m.west:8000', move: 'move/models/m' };
    for (const [sent, expected] of [
      [movedTo, movedTo],
      [{ cluster: 'west' }, undefined],
      [{ ...movedTo, endpoint: 8000 }, undefined],
    ] as const) {
      await withReadyModel(harness, new StubActivities(), async ({ handle }) => {
        await handle.signal(deleteModelSignal, { reason: 'moved to cluster west', movedTo: sent as typeof movedTo });
        const final = await handle.result();
        expect(final).toMatchObject({ reason: 'moved to cluster west', status: { phase: 'Deleted' } });
        if (expected) expect(final.status.movedTo).toMatchObject({ ...expected, at: expect.any(String) });
        else expect(final.status).not.toHaveProperty('movedTo');
        await replays(handle);
      });
    }
  });

  it('serves a model by Signal-With-Start, and updates it by the same call once it runs', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ client, taskQueue }) => {
      const doc = modelDoc();
      const ref = { cluster: 'test', namespace: 'models', name: doc.metadata.name as string };
      const signalWithStart = (spec: Doc) =>
        client.workflow.signalWithStart(ServeModelWorkflow, {
          taskQueue,
          workflowId: workflowIdFor(ref),
          // No spec: it comes with the signal, so one call serves an absent model and updates a running one.
          args: [{ version: 1 } as never],
          signal: updateModelSignal,
          signalArgs: [{ spec }],
          typedSearchAttributes: searchAttributesFor(ref, 'Pending'),
        });
      const handle = await signalWithStart(doc);
      try {
        const ready = await waitForStatus(handle, readyAt(1));
        expect(ready).toMatchObject({ name: doc.metadata.name, generation: 1 });
        doc.spec.replicas = 2;
        const again = await signalWithStart(doc);
        expect(again.signaledRunId).toBe(handle.signaledRunId);
        const updated = await waitForStatus(handle, readyAt(2));
        expect(updated).toMatchObject({ replicas: 2, generation: 2 });
        await replays(handle);
      } finally {
        await handle.terminate('test finished').catch(() => undefined);
      }
    });
  });

  it('fails a Signal-With-Start whose spec names another model, before it creates anything', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ client, taskQueue }) => {
      const doc = modelDoc();
      const wrongId = workflowIdFor({ cluster: 'test', namespace: 'models', name: 'someone-else' });
      const handle = await client.workflow.signalWithStart(ServeModelWorkflow, {
        taskQueue,
        workflowId: wrongId,
        args: [{ version: 1 } as never],
        signal: updateModelSignal,
        signalArgs: [{ spec: doc }],
      });
      const err = await handle.result().then(
        () => expect.fail('the workflow completed'),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(WorkflowFailedError);
      const cause = (err as WorkflowFailedError).cause as { type?: string; message: string };
      expect(cause.type).toBe('InvalidSpec');
      expect(cause.message).toBe(
        `the spec is for ${workflowIdFor({ cluster: 'test', namespace: 'models', name: doc.metadata.name as string })}, not this workflow (${wrongId}): start it with that ID`,
      );
      expect(stub.calls).toEqual([]);
    });
  });
});

// The Temporal CLI that `local:up` installs (deploy/local/install.sh), as a person operating Ferry runs it.
const temporalCli = join(process.env.FERRY_CACHE ?? join(homedir(), '.cache/ferry'), 'temporal-venv/bin/temporal');

/**
 * Runs `temporal workflow <args…>` against the local stack. JSON inputs go through files, as the docs show: an argument
 * `@name` becomes the path of a file holding `files[name]`.
 */
async function temporal(args: string[], files: Record<string, unknown> = {}): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-signal-'));
  const withFiles = args.map((a) => {
    if (!a.startsWith('@')) return a;
    const path = join(dir, `${a.slice(1)}.json`);
    writeFileSync(path, JSON.stringify(files[a.slice(1)]));
    return path;
  });
  const { stdout } = await promisify(execFile)(
    temporalCli,
    ['workflow', ...withFiles, '--address', readLocalEnv().TEMPORAL_ADDRESS, '--namespace', 'default'],
    { timeout: 30_000 },
  );
  return stdout;
}

describe('ServeModelWorkflow changes by signal, through the Temporal CLI', () => {
  it('updates by `temporal workflow signal --name update`, then deletes by `--name delete`', async () => {
    const stub = new StubActivities();
    await withReadyModel(harness, stub, async ({ doc, handle }) => {
      doc.spec.replicas = 2;
      const id = handle.workflowId;
      const sent = await temporal(['signal', '--workflow-id', id, '--name', 'update', '--input-file', '@update'], {
        update: { spec: doc },
      });
      expect(sent).toMatch(/Signal workflow succeeded/);
      expect(await waitForStatus(handle, readyAt(2))).toMatchObject({ replicas: 2, readyReplicas: 2 });

      await temporal(['signal', '--workflow-id', id, '--name', 'delete', '--input', '{"reason": "from the CLI"}']);
      const final = await handle.result();
      expect(final).toMatchObject({ reason: 'from the CLI', status: { phase: 'Deleted', generation: 2 } });
    });
  });

  it('serves an absent model by `temporal workflow signal-with-start`, as the docs show', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ client, taskQueue }) => {
      const doc = modelDoc();
      const id = workflowIdFor({ cluster: 'test', namespace: 'models', name: doc.metadata.name as string });
      await temporal(
        ['signal-with-start', '--type', 'ServeModelWorkflow', '--task-queue', taskQueue, '--workflow-id', id].concat([
          '--input',
          '{"version": 1}',
          '--signal-name',
          'update',
          '--signal-input-file',
          '@update',
        ]),
        { update: { spec: doc } },
      );
      const handle = client.workflow.getHandle<typeof ServeModelWorkflow>(id);
      try {
        expect(await waitForStatus(handle, readyAt(1))).toMatchObject({ name: doc.metadata.name, generation: 1 });
      } finally {
        await handle.terminate('test finished').catch(() => undefined);
      }
    });
  });
});
