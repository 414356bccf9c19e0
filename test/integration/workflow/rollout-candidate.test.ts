// What a rollout's candidate gets before the front sends it a request (docs/design/rollout.md, section 4), beside its
// weights and engine. The model's LoRA adapters: their files on its own volume, loaded on its own replicas; what it
// holds is the model's status from the promotion on, and a look afterwards keeps them in its slot. A candidate that
// lacks an adapter the current revision serves is rolled back before any request reaches it. With `slo`, its own
// baseline and admission limit, measured on its replica; one that meets the goal not even one request at a time, where
// the current revision does, is rolled back. Activities are stubs; the Temporal server is real.
import { describe, expect, it } from 'vitest';
import {
  modelChangedSignal,
  rolloutActionUpdate,
  updateModelUpdate,
  type AdapterSyncResult,
  type ModelInput,
} from '../../../workflows/contract/index.js';
import { useHarness } from '../../support/fixtures.js';
import { probesUpTo } from '../../support/baseline.js';
import { StubActivities } from '../../support/stub-activities.js';
import {
  modelDoc,
  readyAt,
  waitForStatus,
  withWorker,
  ROLLOUT_OPTIONS,
  type Doc,
} from '../../support/workflow-harness.js';

const harness = useHarness();

const adapter = (name: string) => ({ name, source: { huggingface: { repo: `org/${name}-lora`, revision: 'main' } } });
const canaryWithSlo = (d: Doc) => {
  d.spec.front = {};
  d.spec.rollout = { strategy: 'Canary', steps: [{ traffic: 20 }] };
  d.spec.slo = { ttft: '2s', itl: '100ms', admission: true };
};
const canaryWithAdapters = (d: Doc) => {
  d.spec.front = {};
  d.spec.rollout = { strategy: 'Canary', steps: [{ traffic: 20 }] };
  d.spec.engine.lora = { enabled: true, adapters: [adapter('sql'), adapter('chat')] };
};

/** The one replica of a slot, by its pod's name: `m-0` in slot a, `m-b-0` in slot b. */
const podOf = (input: { slot?: string }) => (input.slot === 'b' ? 'm-b-0/bbbbbbbb/0' : 'm-0/aaaaaaaa/0');

/**
 * A sync that loads every listed adapter on the slot's one replica, but those in `refused` there (for good), and none on
 * slot b's replica the first `unreachable` times it is asked (its engine not answering yet).
 */
function syncIn(refused: string[] = [], unreachable = 0) {
  let askedB = 0;
  return async ({ model, slot }: ModelInput): Promise<AdapterSyncResult> => {
    const notYet = slot === 'b' && askedB++ < unreachable;
    return {
      adapters: (model.spec.engine.lora.adapters ?? []).map((a) => {
        if (notYet) {
          const error = { reason: 'EngineUnreachable' as const, message: 'connection refused', permanent: false };
          return { name: a.name, loadedReplicas: 0, readyReplicas: 1, error };
        }
        if (slot === 'b' && refused.includes(a.name)) {
          const error = { reason: 'AdapterRefused' as const, message: `${podOf({ slot })}: HTTP 400`, permanent: true };
          return { name: a.name, loadedReplicas: 0, readyReplicas: 1, error };
        }
        return { name: a.name, loadedReplicas: 1, readyReplicas: 1 };
      }),
      unloaded: [],
      incarnations: [podOf({ slot })],
    };
  };
}

describe("ServeModelWorkflow rollout: the candidate's adapters and baseline", () => {
  it('loads the adapters on the candidate before its first share (asked again while its engine does not answer yet), shows what it holds from the promotion, and keeps them in its slot', async () => {
    const stub = new StubActivities().on('syncAdapters', syncIn([], 1)).on('lookAtModel', async (input) => ({
      replicas: 1,
      readyReplicas: 1,
      repaired: [],
      incarnations: [podOf(input)],
    }));
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canaryWithAdapters);
      const handle = await start(doc, ROLLOUT_OPTIONS);
      const first = await waitForStatus(handle, readyAt(1));
      expect(first.adapters?.map((a) => [a.name, a.state])).toEqual([
        ['sql', 'Loaded'],
        ['chat', 'Loaded'],
      ]);

      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const done = await waitForStatus(handle, readyAt(2));
      expect(done).toMatchObject({ revision: 'r2', rollout: { state: 'Promoted', traffic: 100 } });

      // In order: the candidate healthy, its adapters fetched onto its volume and loaded, then its first share.
      const order = stub.calls
        .slice(stub.calls.findIndex((c) => c.name === 'awaitHealth' && (c.input as { slot?: string }).slot === 'b'))
        .filter((c) => ['fetchAdapters', 'syncAdapters', 'shiftTraffic'].includes(c.name))
        .map((c) => (c.name === 'shiftTraffic' ? c.name : `${c.name}:${(c.input as { slot?: string }).slot}`));
      expect(order.slice(0, 5)).toEqual([
        'fetchAdapters:b',
        'syncAdapters:b',
        'fetchAdapters:b',
        'syncAdapters:b',
        'shiftTraffic',
      ]);
      expect(stub.callsOf('shiftTraffic')[0]!.input.shares.map((s) => `${s.revision}:${s.weight}`)).toEqual([
        'r1:80',
        'r2:20',
      ]);
      expect(done.timeline.find((e) => e.generation === 2 && e.step === 'adapters')).toMatchObject({
        outcome: 'Succeeded',
        detail: 'r2: 2 of 2 adapters loaded on 1 replica',
      });
      expect(done.adapters).toEqual([
        { name: 'sql', state: 'Loaded', loadedReplicas: 1, readyReplicas: 1 },
        { name: 'chat', state: 'Loaded', loadedReplicas: 1, readyReplicas: 1 },
      ]);

      // A look at r2's replica finds the engine it loaded them on: nothing to do. A new engine there: loaded in slot b.
      const syncs = stub.callsOf('syncAdapters').length;
      await handle.signal(modelChangedSignal, { objects: ['Pod/m-b-0'] });
      await waitForStatus(handle, () => stub.callsOf('lookAtModel').some((c) => c.input.slot === 'b'));
      expect(stub.callsOf('syncAdapters')).toHaveLength(syncs);
      stub.on('lookAtModel', async () => ({
        replicas: 1,
        readyReplicas: 1,
        repaired: [],
        incarnations: ['m-b-0/bbbbbbbb/1'],
      }));
      await handle.signal(modelChangedSignal, { objects: ['Pod/m-b-0'] });
      await waitForStatus(handle, () => stub.callsOf('syncAdapters').length > syncs);
      expect(stub.callsOf('syncAdapters').at(-1)!.input.slot).toBe('b');
      expect(stub.callsOf('fetchAdapters').at(-1)!.input.slot).toBe('b');
    });
  });

  it('rolls back a candidate that cannot load an adapter the current revision serves, before it takes a request', async () => {
    const stub = new StubActivities().on('syncAdapters', syncIn(['chat']));
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canaryWithAdapters);
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));

      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const back = await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted');
      expect(back.rollout?.message).toBe(
        'r2 lacks what the current revision serves: adapter chat failed (loaded on 0 of 1 ready replicas): m-b-0/bbbbbbbb/0: HTTP 400',
      );
      // No request reached r2: the front was only ever told to send every request to r1.
      const shares = stub.callsOf('shiftTraffic').map((c) => c.input.shares.map((s) => `${s.revision}:${s.weight}`));
      expect(shares.flat()).not.toContain('r2:20');
      expect(stub.callsOf('retireRevision').at(-1)!.input).toMatchObject({ slot: 'b', keepVolume: false });
      // r1 serves on, with its adapters as they were.
      const now = await waitForStatus(handle, (s) => s.phase === 'Ready');
      expect(now.revision).toBe('r1');
      expect(now.adapters?.map((a) => [a.name, a.state])).toEqual([
        ['sql', 'Loaded'],
        ['chat', 'Loaded'],
      ]);
    });
  });

  it("measures the candidate's own baseline and sets its admission limit before its first share; its capacity is the model's from the promotion, and an undo keeps the measurement of the revision it returns to", async () => {
    const measuredIn = (input: ModelInput) => (input.slot === 'b' ? 5 : 8);
    const stub = new StubActivities().on('measureBaseline', async (input) => ({
      maxConcurrency: measuredIn(input),
      capped: false,
      ttftP95Ms: 100,
      itlP95Ms: 20,
      attainment: 1,
      pod: input.slot === 'b' ? 'm-b-0' : 'm-0',
      probes: probesUpTo(measuredIn(input)),
      durationMs: 30_000,
    }));
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canaryWithSlo);
      const handle = await start(doc, ROLLOUT_OPTIONS);
      const first = await waitForStatus(handle, readyAt(1));
      expect(first.baseline).toMatchObject({ maxConcurrency: 8, generation: 1 });

      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const done = await waitForStatus(handle, readyAt(2));
      expect(done).toMatchObject({ revision: 'r2', rollout: { state: 'Promoted' } });
      expect(done.baseline).toMatchObject({ maxConcurrency: 5, generation: 2, pod: 'm-b-0' });
      // Measured, and its limit set, in slot b before the front sent it anything.
      const order = stub.calls
        .slice(stub.calls.findIndex((c) => c.name === 'awaitHealth' && (c.input as ModelInput).slot === 'b'))
        .filter((c) => ['measureBaseline', 'applyAdmission', 'shiftTraffic'].includes(c.name))
        .map((c) => (c.name === 'shiftTraffic' ? c.name : `${c.name}:${(c.input as ModelInput).slot}`));
      expect(order.slice(0, 3)).toEqual(['measureBaseline:b', 'applyAdmission:b', 'shiftTraffic']);
      expect(stub.callsOf('applyAdmission').at(-1)!.input.maxConcurrency).toBe(5);
      // The promotion applies the candidate with its own limit, not the revision before's.
      expect(stub.callsOf('applyEngine').at(-1)!.input).toMatchObject({ slot: 'b', admissionLimit: 5 });
      expect(done.timeline.find((e) => e.generation === 2 && e.step === 'baseline')?.detail).toBe(
        'r2: 5 requests at once (ttft p95 100 ms, itl p95 20 ms) on m-b-0',
      );

      // Back to r1: its measurement was kept with it, so its new replica gets its limit and no load.
      const measures = stub.callsOf('measureBaseline').length;
      await handle.executeUpdate(rolloutActionUpdate, { args: [{ action: 'undo', revision: 'r1' }] });
      const back = await waitForStatus(handle, readyAt(3));
      expect(back).toMatchObject({ revision: 'r1', baseline: { maxConcurrency: 8, generation: 1, pod: 'm-0' } });
      expect(stub.callsOf('measureBaseline')).toHaveLength(measures);
      expect(stub.callsOf('applyAdmission').at(-1)!.input).toMatchObject({ maxConcurrency: 8 });
      expect(stub.callsOf('applyAdmission').at(-1)!.input.slot).toBeUndefined();
      expect(stub.callsOf('applyEngine').at(-1)!.input).toMatchObject({ admissionLimit: 8 });
      expect(back.timeline.find((e) => e.generation === 3 && e.step === 'baseline')).toMatchObject({
        outcome: 'Succeeded',
        detail: 'r1: kept from generation 1, and nothing that moves it changed since',
      });
    });
  });

  it('rolls back a candidate that meets the goal not even one request at a time, where the current revision does', async () => {
    const stub = new StubActivities().on('measureBaseline', async (input) => ({
      maxConcurrency: input.slot === 'b' ? 0 : 8,
      capped: false,
      pod: input.slot === 'b' ? 'm-b-0' : 'm-0',
      probes: probesUpTo(input.slot === 'b' ? 0 : 8),
      durationMs: 30_000,
    }));
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc(canaryWithSlo);
      const handle = await start(doc, ROLLOUT_OPTIONS);
      await waitForStatus(handle, readyAt(1));

      doc.spec.source.huggingface.revision = 'v2';
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const back = await waitForStatus(handle, (s) => s.rollout?.state === 'Aborted');
      expect(back.rollout?.message).toBe(
        'r2: the goal is not met even one request at a time on m-b-0, where r1 carries 8 at once',
      );
      expect(stub.callsOf('shiftTraffic').flatMap((c) => c.input.shares.map((s) => s.revision))).not.toContain('r2');
      // r1 serves on, with its own capacity.
      const now = await waitForStatus(handle, (s) => s.phase === 'Ready');
      expect(now).toMatchObject({ revision: 'r1', baseline: { maxConcurrency: 8, generation: 1 } });
    });
  });
});
