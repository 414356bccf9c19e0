import type { KubeConfig } from '@kubernetes/client-node';
import type { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { Cluster } from '../../../activities/cluster/api.js';
import { FIELD_MANAGER } from '../../../activities/builders/index.js';
import { desiredPullerJob } from '../../../activities/steps/puller.js';
import { FAILURE } from '../../../workflows/contract/index.js';
import { activity, rejectionOf, runActivity, testModel } from '../../support/activity-env.js';
import { useActivityEnv } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

// No kubelet serves logs on simulated nodes, so here the puller's log is served by a stand-in: what the real puller
// prints (FERRY_PROGRESS, FERRY_ERROR) must reach heartbeats and failures. Everything else is the real cluster.
class ClusterWithLogs extends Cluster {
  log = '';

  constructor(kc: KubeConfig) {
    super(kc);
  }

  override async podLogTail(): Promise<string | undefined> {
    return this.log || undefined;
  }
}

let cluster: ClusterWithLogs;
const env = useActivityEnv('act-logs', { deps: ({ kc }) => ({ cluster: (cluster = new ClusterWithLogs(kc)) }) });

describe('what the puller prints', () => {
  it('heartbeats carry the bytes downloaded so far', async () => {
    const model = testModel('progress', env.ns, { labels: { 'sim.ferry.dev/puller-scenario': 'run-forever' } });
    const claim = await activity(env.acts.claimName, { model });
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    await activity(env.acts.applyStorage, input);
    const { jobName } = await activity(env.acts.startPuller, input);
    cluster.log = 'Fetching 4 files\nFERRY_PROGRESS {"bytes": 1048576, "totalBytes": 4194304}\n';

    const run = runActivity(env.acts.awaitPuller, { model, jobName });
    const beat = await waitFor('a heartbeat with bytes', 20_000, async () => run.heartbeats.find((h) => h.bytes));
    expect(beat).toMatchObject({ step: 'download', state: 'Running', bytes: 1048576, totalBytes: 4194304 });
    run.env.cancel();
    await rejectionOf(run.result);
    await activity(env.acts.releaseVolume, { model, jobName, sourceHash: claim.sourceHash, abandon: true });
  });

  it('a finished download reports the bytes its last line says it wrote, however fast it was', async () => {
    const model = testModel('fast', env.ns);
    const claim = await activity(env.acts.claimName, { model });
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    await activity(env.acts.applyStorage, input);
    cluster.log =
      'FERRY_PROGRESS {"bytes": 0, "totalBytes": null}\n' +
      'FERRY_PROGRESS {"bytes": 633334, "totalBytes": 633334}\n' +
      'FERRY_DONE {"dest": "/models/17b51e39", "bytes": 633334, "skipped": false}\n';
    const { jobName } = await activity(env.acts.startPuller, input);
    const result = await activity(env.acts.awaitPuller, { model, jobName });
    expect(result).toMatchObject({ jobName, bytes: 633334 });
    await activity(env.acts.releaseVolume, { model, jobName, sourceHash: claim.sourceHash });
  });

  it("a failure names the puller's own reason and quotes the log tail", async () => {
    const model = testModel('gated', env.ns, {
      labels: { 'sim.ferry.dev/puller-scenario': 'fail' },
      spec: { puller: { backoffLimit: 0 } },
    });
    const claim = await activity(env.acts.claimName, { model });
    await activity(env.acts.applyStorage, { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash });
    const job = desiredPullerJob(model, claim.rootUid);
    // The simulated kubelet reads the exit code from the pod's annotations.
    job.spec!.template.metadata!.annotations!['sim.ferry.dev/exit-code'] = '1';
    await cluster.apply(job, FIELD_MANAGER);
    cluster.log =
      'FERRY_PROGRESS {"bytes": 0, "totalBytes": null}\n' +
      'FERRY_ERROR {"reason": "AccessDenied", "message": "the repository is gated: accept its terms"}\n';

    const err = (await rejectionOf(
      activity(env.acts.awaitPuller, { model, jobName: job.metadata!.name! }),
    )) as unknown as ApplicationFailure;
    expect(err.type).toBe(FAILURE.AccessDenied);
    expect(err.message).toMatch(
      /^the repository is gated: accept its terms; the puller failed once .*exited with code 1$/,
    );
    expect(err.details?.[0]).toMatchObject({ exitCode: 1, errorReason: 'AccessDenied' });
    expect((err.details?.[0] as { logTail: string }).logTail).toContain('FERRY_ERROR');
  });
});
