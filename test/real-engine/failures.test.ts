// Failures from the real thing, each classified by Ferry with a named reason a person can act on: vLLM refusing an
// argument (its argparse, exit code 2), the real huggingface_hub asking the Hub for a repository it does not have, a
// Hub that stops sending in the middle of a file, and an engine over its memory limit (the kernel's OOM killer, in the
// node agent's memory cgroup). The models run side by side; each is a real process for a few seconds.
import { beforeAll, describe, expect, it } from 'vitest';
import type { ModelStatus } from '../../workflows/contract/index.js';
import { ferryJson, uniqueCluster } from '../support/e2e.js';
import { runFerry, writeDoc } from '../support/ferry-worker.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../support/fixtures.js';
import { waitFor } from '../support/kube.js';
import type { Doc } from '../support/workflow-harness.js';
import { HUB, realEngineMissing, tinyDoc } from './support.js';

const missing = realEngineMissing();
const kube = useNamespace('real-fail', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('realfail');

beforeAll(async () => {
  if (!missing) await startWorkerProcess(cluster);
}, 180_000);

/** Serves `name` (examples/tiny.yaml changed by `edit`) and waits until it has Failed; its status then. */
async function failed(name: string, edit: (d: Doc) => void, timeoutMs = 300_000): Promise<ModelStatus> {
  const doc = tinyDoc(kube.ns, cluster, (d) => {
    d.metadata.name = name;
    d.spec.puller.backoffLimit = 0;
    d.spec.engine.startupTimeout = '10m';
    edit(d);
  });
  const served = await runFerry(['serve', '-f', writeDoc(doc)]);
  if (served.code !== 0) throw new Error(`ferry serve ${name}: ${served.stdout}${served.stderr}`);
  return waitFor(`${name} to fail`, timeoutMs, async () => {
    const s = await ferryJson<ModelStatus>(['status', name, '-n', kube.ns, '--cluster', cluster]);
    return s.phase === 'Failed' ? s : undefined;
  });
}

describe.skipIf(missing)(`failures of the real engine and Hub${missing ? ` (skipped: ${missing})` : ''}`, () => {
  it.concurrent('an argument vLLM refuses: EngineArgsRejected with argparse’s own words', async () => {
    const s = await failed('bad-arg', (d) => d.spec.engine.args.push('--no-such-flag'));
    expect(s.lastError!.reason).toBe('EngineArgsRejected');
    expect(['rollout', 'startup']).toContain(s.lastError!.step);
    expect(s.lastError!.message).toContain('unrecognized arguments: --no-such-flag');
    expect(s.lastError!.message).toContain('fix spec.engine.args');
  });

  it.concurrent('a repository the Hub does not have: SourceNotFound from the puller, not a traceback', async () => {
    const s = await failed('no-repo', (d) => (d.spec.source.huggingface.repo = 'ferry-local/no-such-model'));
    expect(s.lastError).toMatchObject({ reason: 'SourceNotFound', step: 'download' });
    expect(s.lastError!.message).toContain('the repository does not exist');
    expect(s.lastError!.message).not.toContain('Traceback');
  });

  it.concurrent('a Hub that stalls mid-file: DeadlineExceeded within the puller’s deadline', async () => {
    const started = Date.now();
    const s = await failed('stalled', (d) => {
      d.spec.puller.deadline = '40s';
      d.spec.puller.env = [{ name: 'HF_ENDPOINT', value: `${HUB}/_ferry/stall-after/100000` }];
    });
    expect(s.lastError).toMatchObject({ reason: 'DeadlineExceeded', step: 'download' });
    // The deadline, and the few seconds the Job controller and the next look take to see it.
    expect(Date.now() - started).toBeLessThan(40_000 + 60_000);
  });

  it.concurrent('a Hub that damages a byte of a file: WeightsCorrupt naming it, and no engine started', async () => {
    const s = await failed('damaged', (d) => {
      d.spec.puller.env = [{ name: 'HF_ENDPOINT', value: `${HUB}/_ferry/corrupt-at/1000` }];
    });
    expect(s.lastError).toMatchObject({ reason: 'WeightsCorrupt', step: 'download' });
    // Every file longer than 1,000 bytes is damaged; they are checked in name order, model.safetensors first.
    expect(s.lastError!.message).toMatch(
      /model\.safetensors is not the file of ferry-local\/tiny-llama@v1: git blob id [0-9a-f]{40}, the Hub states/,
    );
    const engines = await kube.apps.listNamespacedDeployment({
      namespace: kube.ns,
      labelSelector: 'ferry.dev/model=damaged',
    });
    expect(engines.items.every((d) => !d.status?.readyReplicas)).toBe(true);
  });

  it.concurrent('an engine over its memory limit: OOMKilled, from the kernel', async () => {
    const s = await failed('small', (d) => {
      d.spec.resources.memory = '600Mi';
      d.spec.resources.shmSize = '64Mi';
    });
    expect(s.lastError!.reason).toBe('OOMKilled');
    expect(['rollout', 'startup']).toContain(s.lastError!.step);
    expect(s.lastError!.message).toContain('raise resources.memory');
  });
});
