import type { KubeConfig } from '@kubernetes/client-node';
import type { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from '../../../activities/cluster/api';
import { FIELD_MANAGER } from '../../../activities/builders';
import { desiredPullerJob } from '../../../activities/steps/puller';
import { createActivities } from '../../../activities/create-activities';
import { FAILURE, type FerryActivities } from '../../../workflows/contract';
import { activity, rejectionOf, runActivity, testDeps, testModel } from '../../support/activity-env';
import {
  adminKubeConfig,
  clientsFor,
  createNamespace,
  deleteNamespace,
  waitFor,
  type Clients,
} from '../../support/kube';

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

let c: Clients;
let ns: string;
let cluster: ClusterWithLogs;
let acts: FerryActivities;

beforeAll(async () => {
  c = clientsFor(adminKubeConfig());
  ns = await createNamespace(c, 'act-logs');
  cluster = new ClusterWithLogs(c.kc);
  acts = createActivities({ ...testDeps(), cluster });
});
afterAll(async () => deleteNamespace(c, ns));

describe('what the puller prints', () => {
  it('heartbeats carry the bytes downloaded so far', async () => {
    const model = testModel('progress', ns, { labels: { 'sim.ferry.dev/puller-scenario': 'run-forever' } });
    const claim = await activity(acts.claimName, { model });
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    await activity(acts.applyStorage, input);
    const { jobName } = await activity(acts.startPuller, input);
    cluster.log = 'Fetching 4 files\nFERRY_PROGRESS {"bytes": 1048576, "totalBytes": 4194304}\n';

    const run = runActivity(acts.awaitPuller, { model, jobName });
    const beat = await waitFor('a heartbeat with bytes', 20_000, async () => run.heartbeats.find((h) => h.bytes));
    expect(beat).toMatchObject({ step: 'download', state: 'Running', bytes: 1048576, totalBytes: 4194304 });
    run.env.cancel();
    await rejectionOf(run.result);
    await activity(acts.releaseVolume, { model, jobName, sourceHash: claim.sourceHash, abandon: true });
  });

  it("a failure names the puller's own reason and quotes the log tail", async () => {
    const model = testModel('gated', ns, {
      labels: { 'sim.ferry.dev/puller-scenario': 'fail' },
      spec: { puller: { backoffLimit: 0 } },
    });
    const claim = await activity(acts.claimName, { model });
    await activity(acts.applyStorage, { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash });
    const job = desiredPullerJob(model, claim.rootUid);
    // The simulated kubelet reads the exit code from the pod's annotations.
    job.spec!.template.metadata!.annotations!['sim.ferry.dev/exit-code'] = '1';
    await cluster.apply(job, FIELD_MANAGER);
    cluster.log =
      'FERRY_PROGRESS {"bytes": 0, "totalBytes": null}\n' +
      'FERRY_ERROR {"reason": "AccessDenied", "message": "the repository is gated: accept its terms"}\n';

    const err = (await rejectionOf(
      activity(acts.awaitPuller, { model, jobName: job.metadata!.name! }),
    )) as unknown as ApplicationFailure;
    expect(err.type).toBe(FAILURE.BackoffLimitExceeded);
    expect(err.message).toContain(
      'exited with code 1; AccessDenied: the repository is gated: accept its terms; log tail:',
    );
    expect(err.details?.[0]).toMatchObject({ exitCode: 1, errorReason: 'AccessDenied' });
    expect((err.details?.[0] as { logTail: string }).logTail).toContain('FERRY_ERROR');
  });
});
