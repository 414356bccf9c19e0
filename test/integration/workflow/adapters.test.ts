// LoRA adapters as the workflow keeps them: loaded after the health check (the `adapters` step) before Ready, again
// when a look finds engines that are new since, in place when only the list changes, and a refusal for good shown as
// Degraded AdapterFailed while the base serves. Activities are stubs; the Temporal server is real.
import { describe, expect, it } from 'vitest';
import {
  modelChangedSignal,
  statusQuery,
  updateModelUpdate,
  type AdapterSyncResult,
  type ModelStatus,
} from '../../../workflows/contract/index.js';
import { useHarness } from '../../support/fixtures.js';
import { StubActivities } from '../../support/stub-activities.js';
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

const adapter = (name: string) => ({ name, source: { huggingface: { repo: `org/${name}-lora`, revision: 'main' } } });
const withAdapters = (...names: string[]) =>
  modelDoc((d: Doc) => (d.spec.engine.lora = { enabled: true, adapters: names.map(adapter) }));

/** A sync that finds each adapter on the one replica `pod`. */
const loadedOn = (pod: string, names: string[]): AdapterSyncResult => ({
  adapters: names.map((name) => ({ name, loadedReplicas: 1, readyReplicas: 1 })),
  unloaded: [],
  incarnations: [pod],
});

describe('ServeModelWorkflow with LoRA adapters', () => {
  it('fetches and loads the adapters after the health check, then is Ready with each adapter Loaded', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(withAdapters('sql', 'chat'), QUIET);
      const ready = await waitForStatus(handle, readyAt(1));
      expect(ready.adapters).toEqual([
        { name: 'sql', state: 'Loaded', loadedReplicas: 1, readyReplicas: 1 },
        { name: 'chat', state: 'Loaded', loadedReplicas: 1, readyReplicas: 1 },
      ]);
      const order = stub.calls
        .map((c) => c.name)
        .filter((n) => ['awaitHealth', 'fetchAdapters', 'syncAdapters'].includes(n));
      expect(order).toEqual(['awaitHealth', 'fetchAdapters', 'syncAdapters']);
      expect(ready.timeline.find((e) => e.step === 'adapters')).toMatchObject({
        outcome: 'Succeeded',
        detail: '2 of 2 adapters loaded on 1 replica',
      });
    });
  });

  it('a model without adapters never calls the adapter activities', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(
        modelDoc((d: Doc) => (d.spec.engine.lora = { enabled: true })),
        QUIET,
      );
      const ready = await waitForStatus(handle, readyAt(1));
      expect(ready.adapters).toBeUndefined();
      expect(stub.callsOf('fetchAdapters')).toHaveLength(0);
      expect(stub.callsOf('syncAdapters')).toHaveLength(0);
    });
  });

  it('a look that finds a new engine pod shows the gap as Degraded, loads them there, and is Ready again', async () => {
    let pod = 'm-0/aaaaaaaa/0';
    // Held until the test has seen the gap (it may see it before this sync starts).
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const stub = new StubActivities()
      .on('lookAtModel', async () => ({ replicas: 1, readyReplicas: 1, repaired: [], incarnations: [pod] }))
      .on('syncAdapters', async () => {
        if (pod !== 'm-0/aaaaaaaa/0') await released;
        return loadedOn(pod, ['sql']);
      });
    await withWorker(harness, stub, async ({ start }) => {
      const doc = withAdapters('sql');
      const handle = await start(doc, QUIET);
      await waitForStatus(handle, readyAt(1));
      // The same engine: a look changes nothing and loads nothing.
      await handle.signal(modelChangedSignal, { objects: ['Pod/m-0'] });
      await waitForStatus(handle, () => stub.callsOf('lookAtModel').length >= 1);
      expect(stub.callsOf('syncAdapters')).toHaveLength(1);

      pod = 'm-1/bbbbbbbb/0';
      await handle.signal(modelChangedSignal, { objects: ['Pod/m-1'] });
      const gap = await waitForStatus(handle, phaseIs('Degraded'));
      expect(gap.lastError).toMatchObject({ reason: 'AdapterMissing', message: expect.stringContaining('m-1') });
      expect(gap.adapters).toEqual([
        expect.objectContaining({ name: 'sql', state: 'Missing', loadedReplicas: 0, readyReplicas: 1 }),
      ]);
      release();
      const healed = await waitForStatus(handle, phaseIs('Ready'));
      expect(healed.adapters).toEqual([{ name: 'sql', state: 'Loaded', loadedReplicas: 1, readyReplicas: 1 }]);
      expect(stub.callsOf('syncAdapters')).toHaveLength(2);
    });
  });

  it('an adapter refused for good: Degraded AdapterFailed, the base serving; a new list is loaded in place', async () => {
    const stub = new StubActivities().on('syncAdapters', async ({ model }) => ({
      adapters: (model.spec.engine.lora.adapters ?? []).map((a) =>
        a.name === 'bad'
          ? {
              name: 'bad',
              loadedReplicas: 0,
              readyReplicas: 1,
              error: {
                reason: 'AdapterRefused' as const,
                message: 'pod m-0: Loading lora bad failed: No adapter found for /models/adapters/1 (HTTP 404)',
                permanent: true,
              },
            }
          : { name: a.name, loadedReplicas: 1, readyReplicas: 1 },
      ),
      unloaded: [],
      incarnations: ['m-0/aaaaaaaa/0'],
    }));
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(withAdapters('sql', 'bad'), QUIET);
      const failed = await waitForStatus(handle, phaseIs('Degraded'));
      expect(failed.lastError).toMatchObject({
        reason: 'AdapterFailed',
        message: expect.stringContaining('No adapter found'),
      });
      expect(failed.endpoint).toBeDefined();
      expect(failed.adapters?.map((a) => [a.name, a.state])).toEqual([
        ['sql', 'Loaded'],
        ['bad', 'Failed'],
      ]);

      // Only the list changes: no new weights, the same engine applied again, the adapters loaded.
      const pullsBefore = stub.callsOf('startPuller').length;
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: withAdaptersOf(handle, ['sql', 'code']) }] });
      const ready: ModelStatus = await waitForStatus(handle, readyAt(2));
      expect(ready.adapters?.map((a) => [a.name, a.state])).toEqual([
        ['sql', 'Loaded'],
        ['code', 'Loaded'],
      ]);
      expect(stub.callsOf('startPuller')).toHaveLength(pullsBefore);
      expect(
        stub
          .callsOf('syncAdapters')
          .at(-1)!
          .input.model.spec.engine.lora.adapters!.map((a) => a.name),
      ).toEqual(['sql', 'code']);
      expect((await handle.query(statusQuery)).timeline.some((e) => e.detail === 'generation 2: in place')).toBe(true);
    });
  });

  it('an adapter the engine did not answer for is Missing, and a later look of the Degraded model loads it', async () => {
    let answering = false;
    const stub = new StubActivities()
      .on('lookAtModel', async () => ({
        replicas: 1,
        readyReplicas: 1,
        repaired: [],
        incarnations: ['m-0/aaaaaaaa/0'],
      }))
      .on('syncAdapters', async () =>
        answering
          ? loadedOn('m-0/aaaaaaaa/0', ['sql'])
          : {
              adapters: [
                {
                  name: 'sql',
                  loadedReplicas: 0,
                  readyReplicas: 1,
                  error: {
                    reason: 'EngineUnreachable' as const,
                    message: 'pod m-0: no answer within 10 s',
                    permanent: false,
                  },
                },
              ],
              unloaded: [],
              incarnations: ['m-0/aaaaaaaa/0'],
            },
      );
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(withAdapters('sql'), QUIET);
      const missing = await waitForStatus(handle, phaseIs('Degraded'));
      expect(missing.lastError).toMatchObject({
        reason: 'AdapterMissing',
        message: expect.stringContaining('no answer'),
      });
      expect(missing.adapters).toEqual([
        expect.objectContaining({ name: 'sql', state: 'Missing', reason: 'EngineUnreachable' }),
      ]);
      answering = true;
      // No wake is sent: the Degraded model is looked at again by itself (1 s, doubling), and the look loads it.
      const ready = await waitForStatus(handle, phaseIs('Ready'));
      expect(ready.adapters).toEqual([{ name: 'sql', state: 'Loaded', loadedReplicas: 1, readyReplicas: 1 }]);
    });
  });

  it('scaled to 0, no adapter is said to be loaded anywhere', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = withAdapters('sql');
      const handle = await start(doc, QUIET);
      expect((await waitForStatus(handle, readyAt(1))).adapters).toHaveLength(1);
      doc.spec.replicas = 0;
      await handle.executeUpdate(updateModelUpdate, { args: [{ spec: doc }] });
      const scaled = await waitForStatus(handle, readyAt(2));
      expect(scaled.adapters).toBeUndefined();
    });
  });
});

/** The document `handle` serves, with `names` as its adapters. */
function withAdaptersOf(handle: { workflowId: string }, names: string[]): Doc {
  const name = handle.workflowId.split('/').pop()!;
  return modelDoc((d: Doc) => (d.spec.engine.lora = { enabled: true, adapters: names.map(adapter) }), name);
}
