import { CancelledFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { FAILURE } from '../../../workflows/contract/index.js';
import { activity, rejectionOf, runActivity, testModel } from '../../support/activity-env.js';
import { annotateEnginePods, enginePodsOf, heartbeatWhere, prepareModel } from '../../support/engine-env.js';
import { RESTRICTED, useActivityEnv } from '../../support/fixtures.js';

// What a rollout does when the engine's pods misbehave as they would on a real kubelet (KWOK scenarios chosen by the
// model's labels, which Ferry copies to its pods): failures a person must fix end the step with a named reason;
// waiting states that recover by themselves are reported, not failed.
const env = useActivityEnv('act-rollout', { labels: RESTRICTED, timing: { pollMs: 250 } });

/**
 * Applies a model's engine with its root and volume; returns the awaitRollout input. With `exitCode`, its pods are
 * annotated for KWOK before the first one exists, so a crash exits with that code.
 */
async function applied(name: string, options: Parameters<typeof testModel>[2] = {}, exitCode?: number) {
  const model = testModel(name, env.ns, { ...options, spec: { resources: { gpus: 0 }, ...options.spec } });
  const rootUid = await prepareModel(model, env.cluster);
  if (exitCode !== undefined) {
    await activity(env.acts.applyEngine, { model, rootUid, sourceHash: 'x', replicas: 0 });
    await annotateEnginePods(env.cluster, model, { 'sim.ferry.dev/exit-code': String(exitCode) });
  }
  const { generation } = await activity(env.acts.applyEngine, { model, rootUid, sourceHash: 'x' });
  return { model, generation };
}

const scenario = (s: string, extra: Record<string, string> = {}) => ({
  labels: { 'sim.ferry.dev/engine-scenario': s, ...extra },
});

describe('awaitRollout classifies the current revision’s pods', () => {
  it('crash-loop: CrashLoopBackOff with the exit code, non-retryable', async () => {
    const input = await applied('crashy', scenario('crash-loop'), 3);
    const err = await rejectionOf(activity(env.acts.awaitRollout, input));
    expect(err).toMatchObject({ type: FAILURE.CrashLoopBackOff, nonRetryable: true });
    const [pod] = await enginePodsOf(env, input.model);
    const exitCode = pod!.status!.containerStatuses![0]!.lastState!.terminated!.exitCode;
    expect(exitCode).toBe(3);
    expect(err.message).toContain('with exit code 3');
    expect(err.message).toContain(pod!.metadata!.name!);
  });

  it('image-pull-backoff: ImagePullBackOff naming the image', async () => {
    const input = await applied('no-image', scenario('image-pull-backoff'));
    const err = await rejectionOf(activity(env.acts.awaitRollout, input));
    expect(err).toMatchObject({ type: FAILURE.ImagePullBackOff, nonRetryable: true });
    expect(err.message).toContain(input.model.spec.engine.image);
  });

  it('oom-killed: OOMKilled with exit code 137', async () => {
    const input = await applied('hungry', scenario('oom-killed'));
    const err = await rejectionOf(activity(env.acts.awaitRollout, input));
    expect(err).toMatchObject({ type: FAILURE.OOMKilled, nonRetryable: true });
    expect(err.message).toContain('exit code 137');
  });

  it('unschedulable (16 GPUs, 4 per node): a waiting state in the heartbeats until cancelled, not a failure', async () => {
    const input = await applied('too-big', { spec: { resources: { gpus: 16 } } });
    const run = runActivity(env.acts.awaitRollout, input);
    // The scheduler may first say that the claim is not bound yet (also Unschedulable); then it names the GPUs.
    const beat = await heartbeatWhere(run, (h) => h.state === 'Unschedulable' && /Insufficient/.test(h.message ?? ''));
    expect(beat).toMatchObject({ step: 'rollout', readyReplicas: 0 });
    expect(beat.message).toMatch(/waits for a node: .*Insufficient nvidia\.com\/gpu/);
    // Still waiting a while later: nothing about it is fatal.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(run.heartbeats.at(-1)?.state).toBe('Unschedulable');
    run.env.cancel();
    expect(await rejectionOf(run.result)).toBeInstanceOf(CancelledFailure);
  });

  it('a revision that fixes a crash-looping one rolls out: old pods are not the current revision', async () => {
    const broken = await applied('fixed', scenario('crash-loop'), 1);
    await rejectionOf(activity(env.acts.awaitRollout, broken));
    const model = testModel('fixed', env.ns, { spec: { resources: { gpus: 0 } } });
    const rootUid = (await env.core.readNamespacedConfigMap({ name: 'fixed-ferry', namespace: env.ns })).metadata!.uid!;
    const { generation } = await activity(env.acts.applyEngine, { model, rootUid, sourceHash: 'x' });
    const rollout = await activity(env.acts.awaitRollout, { model, generation });
    expect(rollout).toMatchObject({ generation, readyReplicas: 1 });
  });
});
