// The load baseline as the workflow keeps it: measured (the `baseline` step) after the health check and before Ready
// for a model with `spec.slo`; kept across an update that cannot move it (labels, replicas), measured again after
// one that can (engine args); never for a model without a goal; a refusal of the measurement's requests ends in
// Failed with the engine's words, and a fixed workload measures. Activities are stubs; the Temporal server is real.
import { describe, expect, it } from 'vitest';
import { FAILURE, updateModelUpdate, type ModelStatus } from '../../../workflows/contract/index.js';
import { useHarness } from '../../support/fixtures.js';
import { failure, StubActivities, transient } from '../../support/stub-activities.js';
import {
  FAST,
  modelDoc,
  phaseIs,
  readyAt,
  waitForStatus,
  withWorker,
  type Doc,
} from '../../support/workflow-harness.js';

const harness = useHarness();
const QUIET = { ...FAST, safetyNetIntervalMs: 3_600_000 };
const SLO = { ttft: '2s', itl: '100ms' };

const withSlo = (patch?: (d: Doc) => void, name?: string) =>
  modelDoc((d: Doc) => {
    d.spec.slo = { ...SLO };
    patch?.(d);
  }, name);
const nameOf = (handle: { workflowId: string }) => handle.workflowId.split('/').pop()!;
const baselineEntries = (status: ModelStatus) => status.timeline.filter((e) => e.step === 'baseline');

describe('ServeModelWorkflow with a latency goal', () => {
  it('measures the baseline after the health check, before Ready, and shows it in status and the timeline', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(withSlo(), QUIET);
      const ready = await waitForStatus(handle, readyAt(1));
      const order = stub.calls.map((c) => c.name).filter((n) => ['awaitHealth', 'measureBaseline'].includes(n));
      expect(order).toEqual(['awaitHealth', 'measureBaseline']);
      expect(ready.baseline).toMatchObject({
        maxConcurrency: 8,
        capped: false,
        ttftP95Ms: 100,
        itlP95Ms: 20,
        goal: { ttft: '2s', itl: '100ms', attainment: 0.95 },
        shape: { promptTokens: 256, outputTokens: 128 },
        generation: 1,
        probes: '1✓ 2✓ 4✓ 8✓ 16✗ 12✗ 10✗ 9✗',
        pod: `${nameOf(handle)}-0`,
      });
      expect(ready.baseline?.key).toMatch(/^[0-9a-f]{16}$/);
      expect(baselineEntries(ready)).toEqual([
        expect.objectContaining({
          outcome: 'Succeeded',
          generation: 1,
          detail: `8 requests at once (ttft p95 100 ms, itl p95 20 ms) on ${nameOf(handle)}-0`,
        }),
      ]);
      // The phase history: the measurement is part of starting, not of Ready.
      const timeline = ready.timeline.map((e) => e.step);
      expect(timeline.indexOf('baseline')).toBeGreaterThan(timeline.indexOf('startup'));
      // Admission: the Deployment started without a limit (nothing measured yet); the measurement set it.
      expect(stub.callsOf('applyEngine').map((c) => c.input.admissionLimit)).toEqual([undefined]);
      expect(stub.callsOf('applyAdmission').map((c) => c.input.maxConcurrency)).toEqual([8]);
    });
  });

  it('a limit that could not be written is written again without measuring again', async () => {
    // Both attempts of the activity fail (FAST allows 2), so the step is retried by the workflow.
    const stub = new StubActivities()
      .throwOnce('applyAdmission', transient('KubernetesHttp503'))
      .throwOnce('applyAdmission', transient('KubernetesHttp503'));
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(withSlo(), QUIET);
      const ready = await waitForStatus(handle, readyAt(1));
      expect(stub.callsOf('measureBaseline')).toHaveLength(1);
      expect(stub.callsOf('applyAdmission').map((c) => [c.input.maxConcurrency, c.outcome])).toEqual([
        [8, 'threw'],
        [8, 'threw'],
        [8, 'returned'],
      ]);
      expect(ready.baseline).toMatchObject({ maxConcurrency: 8, generation: 1 });
      expect(baselineEntries(ready).map((e) => e.outcome)).toContain('Succeeded');
    });
  });

  it('measures but never sets a limit with admission off', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const ready = await waitForStatus(
        await start(
          withSlo((d) => (d.spec.slo.admission = false)),
          QUIET,
        ),
        readyAt(1),
      );
      expect(ready.baseline?.maxConcurrency).toBe(8);
      expect(stub.callsOf('applyAdmission')).toHaveLength(0);
    });
  });

  it('a model without a goal is never measured and has no baseline', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const ready = await waitForStatus(await start(modelDoc(), QUIET), readyAt(1));
      expect(ready.baseline).toBeUndefined();
      expect(baselineEntries(ready)).toEqual([]);
      expect(stub.callsOf('measureBaseline')).toHaveLength(0);
    });
  });

  it('keeps the baseline across a label or replica change, and measures again after an engine-args change', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(withSlo(), QUIET);
      const first = await waitForStatus(handle, readyAt(1));
      const name = nameOf(handle);

      const relabelled = withSlo((d) => {
        d.metadata.labels = { team: 'search' };
        d.spec.replicas = 2;
      }, name);
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: relabelled }] });
      const kept = await waitForStatus(handle, readyAt(2));
      expect(stub.callsOf('measureBaseline')).toHaveLength(1);
      expect(kept.baseline).toEqual(first.baseline);
      // The kept baseline's limit goes with the Deployment applied again; nothing else rewrites it.
      expect(stub.callsOf('applyEngine').at(-1)?.input.admissionLimit).toBe(8);
      expect(stub.callsOf('applyAdmission')).toHaveLength(1);
      expect(baselineEntries(kept).at(-1)).toMatchObject({
        generation: 2,
        outcome: 'Skipped',
        detail: 'kept: measured at generation 1, and nothing that moves it changed since',
      });

      const newArgs = withSlo((d) => {
        d.metadata.labels = { team: 'search' };
        d.spec.replicas = 2;
        d.spec.engine.args = ['--max-num-seqs=16'];
      }, name);
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: newArgs }] });
      const measured = await waitForStatus(handle, readyAt(3));
      expect(stub.callsOf('measureBaseline')).toHaveLength(2);
      expect(measured.baseline).toMatchObject({ generation: 3, maxConcurrency: 8 });
      expect(measured.baseline?.key).not.toBe(first.baseline?.key);
      expect(baselineEntries(measured).at(-1)).toMatchObject({ generation: 3, outcome: 'Succeeded' });
      // New engine args: the old limit no longer holds, so the Deployment starts without one until measured.
      expect(stub.callsOf('applyEngine').at(-1)?.input.admissionLimit).toBeUndefined();
      expect(stub.callsOf('applyAdmission')).toHaveLength(2);
    });
  });

  it("a refusal of the measurement's requests ends in Failed with the engine's words; a workload that fits measures", async () => {
    const refusal =
      "pod m-0 refused the load measurement's requests (spec.slo.workload: 8192 prompt and 128 output tokens): HTTP 400: This model's maximum context length is 4096 tokens";
    const stub = new StubActivities().throwOnce('measureBaseline', failure(FAILURE.MeasurementRefused, refusal));
    await withWorker(harness, stub, async ({ start }) => {
      const tooLong = withSlo((d) => (d.spec.slo.workload = { promptTokens: 8192 }));
      const handle = await start(tooLong, QUIET);
      const failed = await waitForStatus(handle, phaseIs('Failed'));
      expect(failed.lastError).toMatchObject({ reason: 'MeasurementRefused', message: refusal, step: 'baseline' });
      expect(failed.baseline).toBeUndefined();
      expect(failed.endpoint).toBeUndefined();

      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: withSlo(undefined, nameOf(handle)) }] });
      const ready = await waitForStatus(handle, readyAt(2));
      expect(ready.baseline).toMatchObject({ generation: 2, maxConcurrency: 8 });
      expect(ready.lastError).toBeUndefined();
    });
  });
});
