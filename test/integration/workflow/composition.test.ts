import { WorkflowFailedError } from '@temporalio/client';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { modelRefOf, parseServedModel, statusQuery, workflowIdFor } from '../../../workflows/contract/index.js';
import { StubActivities } from '../../support/stub-activities.js';
import { useHarness } from '../../support/fixtures.js';
import { FAST, modelDoc, withWorker, type ModelHandle } from '../../support/workflow-harness.js';
import { evaluateCheckpointWorkflow } from './fixtures/evaluate-checkpoint.js';

const harness = useHarness(join(import.meta.dirname, 'fixtures', 'evaluate-checkpoint.ts'));

describe('ServeModelWorkflow as a child workflow', () => {
  it.each([
    { failEvaluation: false, outcome: 'returns the endpoint' },
    { failEvaluation: true, outcome: 'fails' },
  ])(
    'tells its parent when Ready and is deleted when the parent is done (evaluation $outcome)',
    async ({ failEvaluation }) => {
      const stub = new StubActivities();
      await withWorker(harness, stub, async ({ client, taskQueue }) => {
        const spec = parseServedModel(modelDoc());
        const parent = await client.workflow.start(evaluateCheckpointWorkflow, {
          taskQueue,
          workflowId: `evaluate-${spec.metadata.name}`,
          args: [{ serve: { version: 1, spec, options: FAST }, failEvaluation }],
        });
        const outcome = await parent.result().then(
          (endpoint) => ({ endpoint }),
          (err: unknown) => ({ err }),
        );
        if (failEvaluation) {
          expect((outcome as { err: WorkflowFailedError }).err).toBeInstanceOf(WorkflowFailedError);
          expect((outcome as { err: WorkflowFailedError }).err.cause).toMatchObject({ type: 'EvaluationFailed' });
        } else {
          expect(outcome).toEqual({ endpoint: `http://${spec.metadata.name}.models.svc:8000/v1` });
        }
        expect(stub.callsOf('tearDown')).toHaveLength(1);
        const child: ModelHandle = client.workflow.getHandle(workflowIdFor(modelRefOf(spec)));
        expect((await child.describe()).status.name).toBe('CANCELLED');
        expect((await child.query(statusQuery)).phase).toBe('Deleted');
      });
    },
  );
});
