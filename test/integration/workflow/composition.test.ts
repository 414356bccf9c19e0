// Ferry's checkpoint-evaluation workflow (workflows/compose/), a parent on the caller's task queue with
// ServeModelWorkflow as its child: serve → Ready → evaluate → delete, for every way the parent can end.
import { ApplicationFailure } from '@temporalio/common';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { EvaluationTarget } from '../../../workflows/compose/index.js';
import { modelRefOf, parseServedModel, statusQuery, workflowIdFor } from '../../../workflows/contract/index.js';
import { eventually } from '../../support/ferry-worker.js';
import { useHarness } from '../../support/fixtures.js';
import { blockUntilCancelled, StubActivities } from '../../support/stub-activities.js';
import { FAST, modelDoc, withWorker, type ModelHandle } from '../../support/workflow-harness.js';
import { evaluateCheckpointWorkflow } from './fixtures/evaluate-checkpoint.js';

const harness = useHarness(join(import.meta.dirname, 'fixtures', 'evaluate-checkpoint.ts'));

// The caller's evaluation activities.
const evaluations = {
  scores: async ({ endpoint, servedModelName }: EvaluationTarget) => ({ endpoint, servedModelName, score: 0.87 }),
  throws: async ({ endpoint }: EvaluationTarget) => {
    throw ApplicationFailure.nonRetryable(`evaluation against ${endpoint} failed`, 'EvaluationFailed');
  },
  runsForever: async () => blockUntilCancelled(),
};

type Ending = 'succeeds' | 'throws' | 'cancelled' | 'terminated';

describe('the checkpoint-evaluation workflow', () => {
  it.each<{ ending: Ending; activity: keyof typeof evaluations }>([
    { ending: 'succeeds', activity: 'scores' },
    { ending: 'throws', activity: 'throws' },
    { ending: 'cancelled', activity: 'runsForever' },
    { ending: 'terminated', activity: 'runsForever' },
  ])('serves, evaluates and deletes the model when the parent $ending', async ({ ending, activity }) => {
    const stub = new StubActivities();
    await withWorker(
      harness,
      stub,
      async ({ client, taskQueue }) => {
        const doc = modelDoc();
        const spec = parseServedModel(doc);
        const child: ModelHandle = client.workflow.getHandle(workflowIdFor(modelRefOf(spec)));
        const parent: WorkflowHandle<typeof evaluateCheckpointWorkflow> = await client.workflow.start(
          evaluateCheckpointWorkflow,
          {
            taskQueue,
            workflowId: `evaluate-${spec.metadata.name}`,
            args: [{ model: doc, evaluation: { activity }, serve: { taskQueue, options: FAST } }],
          },
        );
        if (ending === 'cancelled' || ending === 'terminated') {
          // Stop the parent while its evaluation runs: the model is Ready by then.
          await eventually(
            () => child.query(statusQuery).catch(() => undefined),
            (s) => s?.phase === 'Ready',
          );
          if (ending === 'cancelled') await parent.cancel();
          else await parent.terminate('the parent is gone');
        }
        const outcome = await parent.result().then(
          (result) => ({ result }),
          (err: unknown) => ({ err }),
        );
        if (ending === 'succeeds') {
          const endpoint = `http://${spec.metadata.name}.models.svc:8000/v1`;
          expect(outcome).toEqual({
            result: { endpoint, evaluation: { endpoint, servedModelName: spec.metadata.name, score: 0.87 } },
          });
        } else {
          expect((outcome as { err: unknown }).err).toBeInstanceOf(WorkflowFailedError);
        }
        if (ending === 'throws') {
          expect((outcome as { err: WorkflowFailedError }).err.cause).toMatchObject({
            cause: { type: 'EvaluationFailed' },
          });
        }
        // However the parent ended, the child tore the model down and ended cancelled.
        await eventually(
          async () => (await child.describe()).status.name,
          (name) => name === 'CANCELLED',
        );
        expect((await child.query(statusQuery)).phase).toBe('Deleted');
        expect(stub.callsOf('tearDown')).toHaveLength(1);
      },
      evaluations,
    );
  });

  it('fails the parent with InvalidSpec and the field issues for an invalid document, starting nothing', async () => {
    const stub = new StubActivities();
    await withWorker(harness, stub, async ({ client, taskQueue }) => {
      const doc = modelDoc((d) => (d.spec.replicas = -1));
      const parent = await client.workflow.start(evaluateCheckpointWorkflow, {
        taskQueue,
        workflowId: `evaluate-invalid-${doc.metadata.name as string}`,
        args: [{ model: doc, evaluation: { activity: 'scores' }, serve: { taskQueue, options: FAST } }],
      });
      const err = await parent.result().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WorkflowFailedError);
      expect((err as WorkflowFailedError).cause).toMatchObject({
        type: 'InvalidSpec',
        message: expect.stringContaining('spec.replicas: must be 0 or more') as unknown,
      });
      expect(stub.callsOf('claimName')).toHaveLength(0);
    });
  });
});
