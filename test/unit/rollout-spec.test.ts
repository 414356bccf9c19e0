// `spec.rollout` (docs/design/rollout.md): what is accepted, the defaults filled in, and each refusal on its own field
// in words that say the fix.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseServedModel, safeParseServedModel } from '../../workflows/contract/index.js';

const doc = (spec: Record<string, unknown>) => ({
  apiVersion: 'ferry.dev/v1alpha1',
  kind: 'ServedModel',
  metadata: { name: 'qwen', namespace: 'models' },
  spec: { source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct' } }, front: {}, ...spec },
});

const refusals = (spec: Record<string, unknown>) => {
  const parsed = safeParseServedModel(doc(spec));
  if (parsed.ok) throw new Error('accepted');
  return parsed.issues.map((i) => `${i.path}: ${i.message}`);
};

describe('spec.rollout', () => {
  it('is unset by default (Recreate), and fills its defaults when given', () => {
    expect(parseServedModel(doc({})).spec.rollout).toBeUndefined();
    expect(parseServedModel(doc({ rollout: {} })).spec.rollout).toEqual({
      strategy: 'Recreate',
      steps: [],
      keepRevisions: 1,
    });
    const canary = parseServedModel(
      doc({ rollout: { strategy: 'Canary', steps: [{ traffic: 10 }, { traffic: 50, gate: '10m' }, { traffic: 50 }] } }),
    );
    expect(canary.spec.rollout).toEqual({
      strategy: 'Canary',
      steps: [
        { traffic: 10, gate: 'health' },
        { traffic: 50, gate: '10m' },
        { traffic: 50, gate: 'health' },
      ],
      keepRevisions: 1,
    });
    const blueGreen = parseServedModel(
      doc({ rollout: { strategy: 'BlueGreen', steps: [{ traffic: 0, gate: '1h' }] } }),
    );
    expect(blueGreen.spec.rollout?.steps).toEqual([{ traffic: 0, gate: '1h' }]);
  });

  it('accepts examples/canary.yaml', () => {
    const text = readFileSync(new URL('../../examples/canary.yaml', import.meta.url), 'utf8');
    expect(parseServedModel(parseYaml(text)).spec.rollout).toMatchObject({ strategy: 'Canary', keepRevisions: 1 });
  });

  it('refuses what it cannot do, each on its field', () => {
    expect(refusals({ front: undefined, rollout: { strategy: 'Canary', steps: [{ traffic: 10 }] } })).toEqual([
      'spec.rollout.strategy: Canary needs front (add `front: {}`): the front is what shares the requests between revisions',
    ]);
    expect(refusals({ rollout: { strategy: 'Canary' } })).toEqual([
      'spec.rollout.steps: needs at least one step with Canary',
    ]);
    expect(
      refusals({ rollout: { strategy: 'Canary', steps: [{ traffic: 50 }, { traffic: 10 }, { traffic: 0 }] } }),
    ).toEqual([
      "spec.rollout.steps[1].traffic: must be at least the step before's 50: a share never goes down",
      'spec.rollout.steps[2].traffic: must be above 0 with Canary: a step at 0 is a BlueGreen gate',
      "spec.rollout.steps[2].traffic: must be at least the step before's 10: a share never goes down",
    ]);
    expect(refusals({ rollout: { strategy: 'BlueGreen', steps: [{ traffic: 10 }] } })).toEqual([
      'spec.rollout.steps[0].traffic: must be 0 with BlueGreen: the candidate takes no request until the switch, got 10',
    ]);
    expect(refusals({ rollout: { steps: [{ traffic: 10 }] } })).toEqual([
      'spec.rollout.steps: must be empty with strategy Recreate: steps are for Canary and BlueGreen',
    ]);
    expect(refusals({ rollout: { strategy: 'Canary', steps: [{ traffic: 101, gate: 'vote' }] } })).toEqual([
      'spec.rollout.steps[0].traffic: must be from 0 to 100',
      'spec.rollout.steps[0].gate: must be health (the candidate\'s replicas ready and answering), evaluation (rollout.evaluation\'s workflow), approval (ferry rollout approve) or a pause like 10m, got "vote"',
    ]);
    expect(
      refusals({ rollout: { strategy: 'Canary', steps: [{ traffic: 1, gate: 'health', timeout: '1h' }] } }),
    ).toEqual(['spec.rollout.steps[0].timeout: is only for gate approval']);
    expect(
      parseServedModel(
        doc({
          rollout: {
            strategy: 'Canary',
            steps: [{ traffic: 5, gate: 'approval', timeout: '2h', onTimeout: 'approve' }],
          },
        }),
      ).spec.rollout?.steps,
    ).toEqual([{ traffic: 5, gate: 'approval', timeout: '2h', onTimeout: 'approve' }]);
    expect(refusals({ rollout: { strategy: 'Canary', steps: [{ traffic: 1, gate: '8d' }] } })).toEqual([
      'spec.rollout.steps[0].gate: must be a pause of at most 7d, got "8d"',
    ]);
    expect(refusals({ rollout: { strategy: 'Rolling' } })).toEqual([
      'spec.rollout.strategy: must be one of Recreate, BlueGreen, Canary, got "Rolling"',
    ]);
    expect(refusals({ rollout: { keepRevisions: 2 } })).toEqual([
      'spec.rollout.keepRevisions: must be 0 or 1: the model has two slots, the current revision and one other',
    ]);
    expect(
      refusals({
        inferencePool: { endpointPicker: { name: 'epp' } },
        rollout: { strategy: 'BlueGreen' },
      }),
    ).toEqual([
      "spec.rollout.strategy: BlueGreen cannot be used with inferencePool (the pool selects the first slot's pods only) yet; use Recreate",
    ]);
  });

  it('takes a canary of a model with slo: the candidate measures its own baseline before it takes a request', () => {
    const slo = { ttft: '1s', itl: '100ms', admission: true };
    const parsed = parseServedModel(doc({ slo, rollout: { strategy: 'Canary', steps: [{ traffic: 10 }] } }));
    expect(parsed.spec.rollout?.strategy).toBe('Canary');
    expect(parsed.spec.slo).toMatchObject({ ttft: '1s', admission: true });
  });

  it('takes a canary of a model with LoRA adapters: the candidate loads them before it takes a request', () => {
    const lora = { enabled: true, adapters: [{ name: 'sql', source: { huggingface: { repo: 'org/sql-lora' } } }] };
    const parsed = parseServedModel(
      doc({ engine: { lora }, rollout: { strategy: 'Canary', steps: [{ traffic: 10 }] } }),
    );
    expect(parsed.spec.rollout?.strategy).toBe('Canary');
    expect(parsed.spec.engine.lora.adapters?.map((a) => a.name)).toEqual(['sql']);
  });

  it("takes an evaluation gate with the team's workflow and task queue, and refuses one without the other", () => {
    const evaluation = { workflow: 'evaluateCandidate', taskQueue: 'evaluations' };
    const steps = [{ traffic: 10 }, { traffic: 50, gate: 'evaluation' }];
    expect(parseServedModel(doc({ rollout: { strategy: 'Canary', steps, evaluation } })).spec.rollout).toMatchObject({
      steps: [
        { traffic: 10, gate: 'health' },
        { traffic: 50, gate: 'evaluation' },
      ],
      evaluation: { ...evaluation, timeout: '1h' },
    });
    expect(refusals({ rollout: { strategy: 'Canary', steps } })).toEqual([
      'spec.rollout.steps[1].gate: needs rollout.evaluation: the workflow and task queue that evaluate the candidate',
    ]);
    expect(refusals({ rollout: { strategy: 'Canary', steps: [{ traffic: 10 }], evaluation } })).toEqual([
      'spec.rollout.evaluation: is used by no step: add a step with gate evaluation',
    ]);
    expect(refusals({ rollout: { evaluation } })).toEqual([
      'spec.rollout.evaluation: is used by no step: add a step with gate evaluation',
    ]);
    expect(
      refusals({
        rollout: {
          strategy: 'BlueGreen',
          steps: [{ traffic: 0, gate: 'evaluation' }],
          evaluation: { workflow: 'evaluate candidate', timeout: '8d' },
        },
      }),
    ).toEqual([
      'spec.rollout.evaluation.workflow: must be a workflow type like evaluateCandidate: 1 to 255 characters, no blanks',
      'spec.rollout.evaluation.taskQueue: must be a task queue like evaluations',
      'spec.rollout.evaluation.timeout: must be at most 7d, got "8d"',
    ]);
  });
});
