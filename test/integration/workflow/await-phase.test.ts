// Waiting for a phase is one `ferry.awaitPhase` update the workflow answers the moment the phase is reached, not a
// status query per second: the waits here poll once a minute, so only the update can end them in time.
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { waitForPhase } from '../../../client/wait-for-phase.js';
import { awaitPhaseUpdate, type ModelRef, type Phase } from '../../../workflows/contract/index.js';
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
const refOf = (name: string): ModelRef => ({ cluster: 'test', namespace: 'models', name });
/** Longer than every test here: a wait that ends did not end by a poll. */
const RARE_POLLS = { pollIntervalMs: 60_000, timeoutMs: 30_000 };

/** The names of the updates the run accepted, in order. */
async function acceptedUpdates(handle: ModelHandle): Promise<string[]> {
  const { events } = await handle.fetchHistory();
  return events!
    .map((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name)
    .filter((n): n is string => typeof n === 'string');
}

describe('ServeModelWorkflow phase waits', () => {
  it('answers a wait for Ready the moment the model is Ready, with one update', async () => {
    const stub = new StubActivities();
    const gate = stub.gate('awaitHealth');
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc();
      const handle = await start(doc);
      const seen: Phase[] = [];
      const waiting = waitForPhase(harness.client, refOf(doc.metadata.name), ['Ready'], {
        ...RARE_POLLS,
        onStatus: (s) => seen.push(s.phase),
      });
      await gate.reached;
      const t0 = Date.now();
      gate.release();
      const status = await waiting;
      expect(status).toMatchObject({ phase: 'Ready', observedGeneration: 1 });
      expect(Date.now() - t0).toBeLessThan(10_000);
      // The first status came from a query, the Ready one from the update.
      expect(seen.at(0)).not.toBe('Ready');
      expect(seen.at(-1)).toBe('Ready');
      expect(await acceptedUpdates(handle)).toEqual(['ferry.awaitPhase']);
    });
  });

  it('lets a wait go when the run continues as new, and the next run answers it', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const doc = modelDoc();
      const first = await start(doc, { ...FAST, continueAsNewAfterEvents: 200 });
      await waitForStatus(first, readyAt(1));
      const waiting = waitForPhase(harness.client, refOf(doc.metadata.name), ['Degraded'], RARE_POLLS);
      const handle: ModelHandle = harness.client.workflow.getHandle(first.workflowId);
      await expect.poll(() => acceptedUpdates(first), { timeout: 10_000, interval: 100 }).toContain('ferry.awaitPhase');
      // Looks every 200 ms grow the history until the run continues as new, with the wait in flight.
      await expect
        .poll(async () => (await handle.describe()).runId, { timeout: 30_000, interval: 100 })
        .not.toBe(first.firstExecutionRunId);
      stub.on('lookAtModel', async () => ({
        replicas: 1,
        readyReplicas: 0,
        problem: { reason: 'Unhealthy', message: 'HTTP 503 from /health' },
        repaired: [],
      }));
      const status = await waiting;
      expect(status.phase).toBe('Degraded');
      expect(await acceptedUpdates(handle)).toContain('ferry.awaitPhase');
    });
  });

  it('refuses a wait that could never be decided, before it reaches history', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ start }) => {
      const handle = await start(modelDoc());
      await waitForStatus(handle, readyAt(1));
      for (const input of [
        { phases: [], generation: 1 },
        { phases: ['Runing'], generation: 1 },
        { phases: ['Ready'], generation: -1 },
      ]) {
        const err = await handle
          .executeUpdate(awaitPhaseUpdate, { args: [input as { phases: Phase[]; generation: number }] })
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
        expect((err as Error & { cause?: Error }).cause?.message).toMatch(/^awaitPhase needs/);
      }
      expect(await acceptedUpdates(handle)).toEqual([]);
    });
  });
});
