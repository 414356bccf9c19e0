import { describe, expect, it } from 'vitest';
import {
  FAILURE,
  ferryModelKey,
  ferryPhaseKey,
  type ModelStatus,
  updateModelUpdate,
} from '../../../workflows/contract/index.js';
import { failure, reportProgress, StubActivities, transient } from '../../support/stub-activities.js';
import { useHarness } from '../../support/fixtures.js';
import {
  modelDoc,
  phaseIs,
  phasesFromHistory,
  readyAt,
  waitForStatus,
  withReadyModel,
  withWorker,
} from '../../support/workflow-harness.js';

const harness = useHarness();

/** The phases of a first start, up to the rollout. */
const FIRST_ROLLOUT = ['Pending', 'Provisioning', 'Downloading', 'Releasing', 'Starting'];

const steps = (status: ModelStatus) => status.timeline.map((e) => `${e.step}:${e.outcome ?? 'open'}`);

describe('ServeModelWorkflow lifecycle', () => {
  it('walks claim → storage → pull → release → engine → rollout → health to Ready, visible everywhere', async () => {
    const stub = new StubActivities();
    await withReadyModel(harness, stub, async ({ doc, handle, ready: status, start }) => {
      expect(stub.names()).toEqual([
        'claimName',
        'applyStorage',
        'startPuller',
        'awaitPuller',
        'releaseVolume',
        'applyEngine',
        'awaitRollout',
        'awaitHealth',
      ]);
      expect(status).toMatchObject({
        phase: 'Ready',
        generation: 1,
        observedGeneration: 1,
        endpoint: `http://${doc.metadata.name}.models.svc:8000/v1`,
        servedModelName: doc.metadata.name,
        source: 'huggingface:Qwen/Qwen2.5-0.5B-Instruct@main',
        readyReplicas: 1,
      });
      expect(status.sourceHash).toMatch(/^[0-9a-f]{64}$/);
      expect(steps(status)).toEqual([
        'claim:Succeeded',
        'storage:Succeeded',
        'download:Succeeded',
        'release:Succeeded',
        'rollout:Succeeded',
        'startup:Succeeded',
      ]);
      for (const entry of status.timeline) {
        expect(entry.durationMs).toBe(Date.parse(entry.endedAt!) - Date.parse(entry.startedAt));
      }
      expect(status.conditions.map((c) => `${c.type}=${c.status}`)).toEqual([
        'NameClaimed=True',
        'StorageReady=True',
        'WeightsReady=True',
        'VolumeReleased=True',
        'RolledOut=True',
        'Healthy=True',
        'Ready=True',
      ]);

      expect(await phasesFromHistory(handle)).toEqual([...FIRST_ROLLOUT, 'Ready']);
      const description = await handle.describe();
      expect(description.typedSearchAttributes.get(ferryPhaseKey)).toBe('Ready');
      expect(description.typedSearchAttributes.get(ferryModelKey)).toBe(doc.metadata.name);
      const metadata = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
      expect(metadata.currentDetails).toContain('**Ready**');
      expect(metadata.currentDetails).toContain(status.endpoint);

      // Starting again with the same ID (the client's USE_EXISTING) reaches the same run and changes nothing.
      const again = await start(doc);
      expect(again.firstExecutionRunId).toBe(handle.firstExecutionRunId);
      expect((await waitForStatus(handle, readyAt(1))).generation).toBe(1);
    });
  });

  it('skips the download when the volume already holds the source', async () => {
    const stub = new StubActivities().on('applyStorage', async (input) => ({
      pvcName: `${input.model.metadata.name}-weights`,
      phase: 'Bound',
      holdsSource: true,
    }));
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(modelDoc((d) => (d.spec.storage = { retainOnDelete: true })));
      const status = await waitForStatus(handle, readyAt(1));
      expect(stub.names()).toEqual(['claimName', 'applyStorage', 'applyEngine', 'awaitRollout', 'awaitHealth']);
      expect(status.timeline.find((e) => e.step === 'download')).toMatchObject({
        outcome: 'Skipped',
        durationMs: 0,
        detail: 'the volume already holds huggingface:Qwen/Qwen2.5-0.5B-Instruct@main',
      });
      expect(status.conditions.find((c) => c.type === 'WeightsReady')).toMatchObject({
        status: 'True',
        reason: 'AlreadyOnVolume',
      });
    });
  });

  it('shows download progress while the puller runs', async () => {
    const stub = new StubActivities();
    const gate = stub.gate('awaitPuller', () =>
      reportProgress({ step: 'download', state: 'Running', bytes: 1_500_000_000, totalBytes: 6_000_000_000 }),
    );
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(modelDoc());
      const during = await waitForStatus(handle, (s) => s.download?.bytes === 1_500_000_000);
      expect(during.phase).toBe('Downloading');
      expect(during.download).toMatchObject({ bytes: 1_500_000_000, totalBytes: 6_000_000_000, state: 'Running' });
      expect(during.waiting).toBeUndefined();
      const metadata = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
      expect(metadata.currentDetails).toContain('download: 1.4 GiB of 5.6 GiB (25%), Running');

      gate.release();
      const after = await waitForStatus(handle, readyAt(1));
      expect(after.download).toMatchObject({ bytes: 1_500_000_000, state: 'Complete' });
    });
  });

  it('shows Unschedulable as a waiting state, not a failure, and becomes Ready once a node appears', async () => {
    const stub = new StubActivities();
    const message = '0/2 nodes are available: 2 Insufficient nvidia.com/gpu.';
    const gate = stub.gate('awaitRollout', () => reportProgress({ step: 'rollout', state: 'Unschedulable', message }));
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(modelDoc());
      const waiting = await waitForStatus(handle, (s) => s.waiting !== undefined);
      expect(waiting.phase).toBe('Starting');
      expect(waiting.waiting).toMatchObject({ reason: 'Unschedulable', message });
      expect(waiting.lastError).toBeUndefined();

      gate.release();
      const ready = await waitForStatus(handle, readyAt(1));
      expect(ready.waiting).toBeUndefined();
    });
  });

  it('shows a transient failure as lastError while it retries, and clears it on success', async () => {
    const stub = new StubActivities();
    // Two activity attempts fail (FAST allows 2), the workflow shows it, then its next try fails once more and waits.
    stub.throwOnce('applyStorage', transient('ApiUnavailable', 'connect ECONNREFUSED 10.0.0.1:6443'));
    stub.throwOnce('applyStorage', transient('ApiUnavailable', 'connect ECONNREFUSED 10.0.0.1:6443'));
    const gate = stub.gate('applyStorage');
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(modelDoc());
      const retrying = await waitForStatus(handle, (s) => s.lastError !== undefined);
      expect(retrying.phase).toBe('Provisioning');
      expect(retrying.lastError).toMatchObject({ reason: 'ApiUnavailable', step: 'storage', generation: 1 });
      expect(retrying.conditions.find((c) => c.type === 'StorageReady')).toMatchObject({
        status: 'False',
        reason: 'ApiUnavailable',
      });

      await gate.reached;
      gate.release();
      const ready = await waitForStatus(handle, readyAt(1));
      expect(ready.lastError).toBeUndefined();
      expect(stub.callsOf('applyStorage')).toHaveLength(3);
    });
  });

  it('fails with a named reason on a non-retryable failure, then an update fixes it without a new download', async () => {
    const stub = new StubActivities().throwOnce(
      'awaitHealth',
      failure(FAILURE.CrashLoopBackOff, 'vllm exited with code 1: unrecognized arguments: --max-model-len=oops'),
    );
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc((d) => (d.spec.engine.args = ['--max-model-len=oops']));
      const handle = await start(doc);
      const failed = await waitForStatus(handle, phaseIs('Failed'));
      expect(failed.lastError).toMatchObject({
        reason: 'CrashLoopBackOff',
        message: 'vllm exited with code 1: unrecognized arguments: --max-model-len=oops',
        step: 'startup',
        generation: 1,
      });
      expect(failed.conditions.find((c) => c.type === 'Ready')).toMatchObject({
        status: 'False',
        reason: 'CrashLoopBackOff',
      });
      expect(failed.timeline.at(-1)).toMatchObject({ step: 'startup', outcome: 'Failed' });

      doc.spec.engine.args = ['--max-model-len=4096'];
      const result = await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      expect(result).toMatchObject({ accepted: true, generation: 2, changed: true, sourceChanged: false });
      const ready = await waitForStatus(handle, readyAt(2));
      expect(ready.lastError).toBeUndefined();
      expect(stub.callsOf('startPuller')).toHaveLength(1);
      expect(stub.names().slice(-3)).toEqual(['applyEngine', 'awaitRollout', 'awaitHealth']);
      expect(await phasesFromHistory(handle)).toEqual([...FIRST_ROLLOUT, 'Failed', 'Starting', 'Ready']);
    });
  });

  it('fails with StartupTimeout when the engine never gets healthy within its startup budget', async () => {
    const stub = new StubActivities().block('awaitHealth');
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(modelDoc((d) => (d.spec.engine.startupTimeout = '3s')));
      const failed = await waitForStatus(handle, phaseIs('Failed'), 15_000);
      expect(failed.lastError).toMatchObject({
        reason: 'StartupTimeout',
        step: 'startup',
        message: 'the engine did not answer /health within engine.startupTimeout (3s)',
      });
      const startup = failed.timeline.find((e) => e.step === 'startup')!;
      expect(startup.outcome).toBe('Failed');
      expect(startup.durationMs).toBeGreaterThanOrEqual(3_000);
    });
  });

  it('goes Degraded when a look finds a problem, and back to Ready by itself when it is gone', async () => {
    let problem: { reason: string; message: string } | undefined;
    const stub = new StubActivities().on('lookAtModel', async () => ({
      replicas: 1,
      readyReplicas: problem ? 0 : 1,
      repaired: [],
      ...(problem ? { problem } : {}),
    }));
    await withReadyModel(harness, stub, async ({ handle }) => {
      problem = { reason: 'CrashLoopBackOff', message: 'container vllm restarted 3 times, last exit code 137' };
      const degraded = await waitForStatus(handle, phaseIs('Degraded'));
      expect(degraded.lastError).toMatchObject(problem);
      expect(degraded.readyReplicas).toBe(0);
      expect(degraded.conditions.find((c) => c.type === 'Ready')).toMatchObject({
        status: 'False',
        reason: 'CrashLoopBackOff',
      });
      expect((await handle.describe()).typedSearchAttributes.get(ferryPhaseKey)).toBe('Degraded');

      problem = undefined;
      const recovered = await waitForStatus(handle, phaseIs('Ready'));
      expect(recovered.lastError).toBeUndefined();
      expect(recovered.readyReplicas).toBe(1);
      expect(recovered.timeline.at(-1)).toMatchObject({
        step: 'degraded',
        outcome: 'Succeeded',
        detail: expect.stringContaining('CrashLoopBackOff'),
      });
    });
  });
});
