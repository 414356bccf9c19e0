import { type ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { FIELD_MANAGER } from '../../../activities/builders/index.js';
import { desiredPullerJob } from '../../../activities/steps/puller.js';
import { FAILURE, type ServedModel, type StepProgress } from '../../../workflows/contract/index.js';
import { activity, rejectionOf, runActivity, testModel } from '../../support/activity-env.js';
import { RESTRICTED, useActivityEnv } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

// How a download ends when it does not succeed: each failure is named by the Job controller's verdict or the pod's
// state (chosen per pod by the simulated nodes' scenarios), never by a raw Kubernetes message alone.
const env = useActivityEnv('act-puller', { labels: RESTRICTED });

/** Claims, provisions and starts the puller of `model`; returns the Job's name. */
async function started(model: ServedModel): Promise<string> {
  const claim = await activity(env.acts.claimName, { model });
  const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
  await activity(env.acts.applyStorage, input);
  return (await activity(env.acts.startPuller, input)).jobName;
}

const puller = (scenario: string) => ({ labels: { 'sim.ferry.dev/puller-scenario': scenario } });

describe.concurrent('a download that does not succeed', () => {
  it('runs past its deadline: DeadlineExceeded with the last state', async () => {
    const model = testModel('slow', env.ns, { ...puller('run-forever'), spec: { puller: { deadline: '3s' } } });
    const jobName = await started(model);
    const run = runActivity(env.acts.awaitPuller, { model, jobName });
    const err = (await rejectionOf(run.result)) as unknown as ApplicationFailure;
    expect(err.type).toBe(FAILURE.DeadlineExceeded);
    expect(err.nonRetryable).toBe(true);
    expect(err.message).toMatch(/^download did not finish within 3s \(puller\.deadline\); last state: Running/);
    expect(run.heartbeats.map((h) => h.state)).toContain('Running');
    // The activity ends on the controller's verdict (FailureTarget); Failed follows once the pod has stopped.
    await waitFor('the Job Failed with DeadlineExceeded', 30_000, async () => {
      const job = await env.batch.readNamespacedJob({ name: jobName, namespace: env.ns });
      return job.status?.conditions?.some((x) => x.type === 'Failed' && x.reason === 'DeadlineExceeded');
    });
  });

  it('fails every attempt: BackoffLimitExceeded with the exit code and what the log says', async () => {
    const model = testModel('broken', env.ns, { ...puller('fail'), spec: { puller: { backoffLimit: 0 } } });
    const claim = await activity(env.acts.claimName, { model });
    await activity(env.acts.applyStorage, { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash });
    // Ferry's own Job, with an exit code for the simulated kubelet to report (it reads it from the pod's annotations).
    const job = desiredPullerJob(model, claim.rootUid);
    job.spec!.template.metadata!.annotations!['sim.ferry.dev/exit-code'] = '3';
    await env.cluster.apply(job, FIELD_MANAGER);
    const jobName = job.metadata!.name!;

    const run = runActivity(env.acts.awaitPuller, { model, jobName });
    const err = (await rejectionOf(run.result)) as unknown as ApplicationFailure;
    expect(err.type).toBe(FAILURE.BackoffLimitExceeded);
    expect(err.nonRetryable).toBe(true);
    expect(err.message).toMatch(
      /^the puller failed once \(puller\.backoffLimit 0 allows 1\); last pod \S+ exited with code 3;/,
    );
    // No kubelet serves logs on simulated nodes.
    expect(err.message).toContain('log tail: log unavailable');
    expect(err.details?.[0]).toMatchObject({ jobName, exitCode: 3, logTail: 'log unavailable' });
    expect(run.heartbeats.map((h) => h.state)).toContain('Running');
    // The failed Job and its pod stay for inspection.
    const pods = await env.core.listNamespacedPod({ namespace: env.ns, labelSelector: `job-name=${jobName}` });
    expect(pods.items.map((p) => p.status?.phase)).toEqual(['Failed']);
  });

  it('cannot pull its image: ImagePullBackOff, and the Job is kept for inspection', async () => {
    const model = testModel('unpullable', env.ns, puller('image-pull-backoff'));
    const jobName = await started(model);
    const err = (await rejectionOf(
      activity(env.acts.awaitPuller, { model, jobName }),
    )) as unknown as ApplicationFailure;
    expect(err.type).toBe(FAILURE.ImagePullBackOff);
    expect(err.nonRetryable).toBe(true);
    expect(err.message).toContain(`image ${model.spec.engine.image} of container puller cannot be pulled`);
    expect(err.message).toContain(`Job ${jobName} is kept for inspection`);
    const job = await env.batch.readNamespacedJob({ name: jobName, namespace: env.ns });
    expect(job.metadata?.deletionTimestamp).toBeUndefined();
  });

  it('keeps a failed Job of the same spec for its logs, and replaces one whose spec changed', async () => {
    const labels = puller('run-forever').labels;
    const model = testModel('redo', env.ns, { labels, spec: { puller: { deadline: '2s' } } });
    const claim = await activity(env.acts.claimName, { model });
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    await activity(env.acts.applyStorage, input);
    const { jobName } = await activity(env.acts.startPuller, input);
    await rejectionOf(activity(env.acts.awaitPuller, { model, jobName }));
    const failed = await env.batch.readNamespacedJob({ name: jobName, namespace: env.ns });

    expect(await activity(env.acts.startPuller, input)).toEqual({ jobName });
    const kept = await env.batch.readNamespacedJob({ name: jobName, namespace: env.ns });
    expect(kept.metadata?.uid).toBe(failed.metadata?.uid);

    // A longer deadline is a new spec for the same source: same name, a new Job.
    const longer = testModel('redo', env.ns, { labels, spec: { puller: { deadline: '1h' } } });
    expect(await activity(env.acts.startPuller, { ...input, model: longer })).toEqual({ jobName });
    const replaced = await env.batch.readNamespacedJob({ name: jobName, namespace: env.ns });
    expect(replaced.metadata?.uid).not.toBe(failed.metadata?.uid);
    expect(replaced.spec?.activeDeadlineSeconds).toBe(3600);
    expect(replaced.status?.conditions ?? []).toEqual([]);
  });

  it('waits while no node fits, reports Unschedulable, and ends promptly when cancelled', async () => {
    const model = testModel('homeless', env.ns, {
      spec: { scheduling: { nodeSelector: { 'ferry.dev/test-no-such-node': 'true' } } },
    });
    const jobName = await started(model);
    const run = runActivity(env.acts.awaitPuller, { model, jobName });
    const seen = await waitFor('an Unschedulable heartbeat', 30_000, async () =>
      run.heartbeats.find((h: StepProgress) => h.state === 'Unschedulable'),
    );
    expect(seen).toMatchObject({
      step: 'download',
      message: expect.stringContaining("didn't match Pod's node affinity"),
    });
    // Still waiting a while later: a node may yet appear.
    const ended = run.result.then(
      () => 'ended',
      () => 'ended',
    );
    const settled = await Promise.race([ended, pause(2_000).then(() => 'waiting')]);
    expect(settled).toBe('waiting');

    const cancelledAt = Date.now();
    run.env.cancel();
    const err = await rejectionOf(run.result);
    expect(err).toBeInstanceOf(CancelledFailure);
    expect(Date.now() - cancelledAt).toBeLessThan(1_000);
    // Cancelling the wait leaves the Job to the workflow (releaseVolume with abandon).
    const job = await env.batch.readNamespacedJob({ name: jobName, namespace: env.ns });
    expect(job.status?.conditions ?? []).toEqual([]);
  });
});

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
