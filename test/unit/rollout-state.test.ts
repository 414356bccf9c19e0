import type { V1Deployment, V1PodTemplateSpec, V1ReplicaSet } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { ProblemConfirmer } from '../../activities/readers/problem-confirmer.js';
import { fatalProblems } from '../../activities/steps/engine-failure.js';
import { buildDeployment } from '../../activities/builders/index.js';
import type { PodProblem } from '../../activities/readers/pod-problems.js';
import { newestReplicaSet, rolloutState } from '../../activities/readers/revision.js';
import { fixtureModel } from './fixtures.js';

// kubectl's `rollout status` rule, as Ferry applies it to the generation an applyEngine returned.
function deployment(generation: number, status: V1Deployment['status'], replicas = 2): V1Deployment {
  return {
    metadata: { name: 'qwen', generation },
    spec: { replicas, selector: {}, template: {}, progressDeadlineSeconds: 3000 },
    status,
  };
}

describe('rolloutState', () => {
  it('waits until the controller has observed the generation', () => {
    const d = deployment(3, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 });
    expect(rolloutState(d, 3)).toMatchObject({ done: false, reason: 'WaitingForController' });
  });

  it('waits for the Deployment’s own newer generation too', () => {
    const d = deployment(4, { observedGeneration: 3, replicas: 2, updatedReplicas: 2, availableReplicas: 2 });
    expect(rolloutState(d, 3)).toMatchObject({ done: false, reason: 'WaitingForController' });
  });

  it('waits for updated, then for old replicas to go, then for availability', () => {
    expect(rolloutState(deployment(2, { observedGeneration: 2, replicas: 2, updatedReplicas: 1 }), 2)).toMatchObject({
      reason: 'UpdatingReplicas',
      message: '1 of 2 new replicas updated',
    });
    expect(rolloutState(deployment(2, { observedGeneration: 2, replicas: 3, updatedReplicas: 2 }), 2)).toMatchObject({
      reason: 'TerminatingOldReplicas',
    });
    expect(
      rolloutState(deployment(2, { observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 1 }), 2),
    ).toMatchObject({ reason: 'WaitingForAvailable', message: '1 of 2 updated replicas available' });
  });

  it('is done when all hold', () => {
    const d = deployment(2, {
      observedGeneration: 2,
      replicas: 2,
      updatedReplicas: 2,
      availableReplicas: 2,
      readyReplicas: 2,
    });
    expect(rolloutState(d, 2)).toEqual({ done: true, replicas: 2, readyReplicas: 2, updatedReplicas: 2 });
    expect(rolloutState(deployment(1, { observedGeneration: 1 }, 0), 1)).toMatchObject({ done: true, replicas: 0 });
  });

  it('is done, for a model that scales, once `enough` updated replicas are available', () => {
    const d = deployment(2, { observedGeneration: 2, replicas: 3, updatedReplicas: 3, availableReplicas: 1 }, 3);
    expect(rolloutState(d, 2, 1)).toMatchObject({ done: true, replicas: 3, updatedReplicas: 3 });
    expect(rolloutState(d, 2, 2)).toMatchObject({ done: false, reason: 'WaitingForAvailable' });
    expect(rolloutState(d, 2)).toMatchObject({ done: false, reason: 'WaitingForAvailable' });
  });

  it('reports ProgressDeadlineExceeded once the controller gave up', () => {
    const d = deployment(2, {
      observedGeneration: 2,
      replicas: 1,
      updatedReplicas: 1,
      conditions: [
        {
          type: 'Progressing',
          status: 'False',
          reason: 'ProgressDeadlineExceeded',
          message: 'ReplicaSet "qwen-x" has timed out progressing.',
        },
      ],
    });
    expect(rolloutState(d, 2)).toMatchObject({
      done: false,
      deadlineExceeded: true,
      reason: 'ProgressDeadlineExceeded',
    });
  });

  it('a Deployment at an older generation than awaited was replaced', () => {
    expect(rolloutState(deployment(1, { observedGeneration: 1 }), 5)).toMatchObject({ reason: 'DeploymentReplaced' });
  });
});

describe('newestReplicaSet', () => {
  const dep = buildDeployment(fixtureModel('minimal-hf'), { rootUid: 'r' });
  dep.metadata!.uid = 'd-1';
  const rs = (name: string, template: V1PodTemplateSpec, created: string, owner = 'd-1'): V1ReplicaSet => ({
    metadata: {
      name,
      creationTimestamp: new Date(created),
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'qwen', uid: owner }],
    },
    spec: { selector: {}, template },
  });
  const withHash = (hash: string) => {
    const t = structuredClone(dep.spec!.template);
    t.metadata!.labels = { ...t.metadata!.labels, 'pod-template-hash': hash };
    return t;
  };

  it('is the ReplicaSet with the Deployment’s template, ignoring the pod-template-hash label', () => {
    const old = structuredClone(dep.spec!.template);
    old.spec!.containers[0]!.image = 'vllm/vllm-openai:v0.10.0';
    const found = newestReplicaSet(dep, [rs('old', old, '2026-01-01'), rs('new', withHash('abc'), '2026-01-02')]);
    expect(found?.metadata?.name).toBe('new');
  });

  it('is none before the controller created it, and never another Deployment’s', () => {
    expect(newestReplicaSet(dep, [rs('theirs', withHash('abc'), '2026-01-02', 'd-2')])).toBeUndefined();
  });
});

describe('ProblemConfirmer', () => {
  const crash: PodProblem = { reason: 'CrashLoopBackOff', message: 'm', waiting: false, pod: 'p' };
  const unschedulable: PodProblem = { reason: 'Unschedulable', message: 'm', waiting: true, pod: 'p' };

  it('confirms a fatal problem seen in consecutive looks a hold interval apart', () => {
    let t = 0;
    const c = new ProblemConfirmer(500, () => t);
    expect(c.confirmed([crash])).toBeUndefined();
    t = 200;
    expect(c.confirmed([crash])).toBeUndefined();
    t = 600;
    expect(c.confirmed([crash])).toBe(crash);
  });

  it('starts over when a look does not see it, and never confirms waiting states', () => {
    let t = 0;
    const c = new ProblemConfirmer(500, () => t);
    c.confirmed([crash]);
    t = 600;
    expect(c.confirmed([])).toBeUndefined();
    t = 700;
    expect(c.confirmed([crash])).toBeUndefined();
    t = 2000;
    expect(c.confirmed([unschedulable])).toBeUndefined();
    expect(c.confirmed([unschedulable])).toBeUndefined();
  });

  it('only image, crash and OOM problems end a wait', () => {
    const failed: PodProblem = { reason: 'PodFailed', message: 'm', waiting: false, pod: 'p' };
    expect(fatalProblems([crash, unschedulable, failed])).toEqual([crash]);
  });
});
