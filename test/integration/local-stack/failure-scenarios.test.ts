import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { useNamespace } from '../../support/fixtures.js';
import { restrictedPod, waitFor } from '../../support/kube.js';

// Each scenario is chosen by a label on the pod (deploy/local/kwok/pod-stages.yaml); the status asserted here is
// what a kubelet would report for the same failure on a real node.
const kube = useNamespace('stack-failures');

function scenarioPod(name: string, scenario: string, annotations: Record<string, string> = {}): V1Pod {
  const pod = restrictedPod(name);
  pod.metadata = { name, labels: { 'sim.ferry.dev/scenario': scenario }, annotations };
  return pod;
}

async function podWhen(name: string, what: string, test: (p: V1Pod) => boolean): Promise<V1Pod> {
  return waitFor(`pod ${name}: ${what}`, 60_000, async () => {
    const p = await kube.core.readNamespacedPod({ name, namespace: kube.ns });
    return test(p) ? p : undefined;
  });
}

const container = (p: V1Pod) => p.status?.containerStatuses?.[0];

describe('simulated failure scenarios', () => {
  it('image-pull-backoff: Pending with the waiting reason ImagePullBackOff and a Failed event', async () => {
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: scenarioPod('pull', 'image-pull-backoff') });
    const p = await podWhen(
      'pull',
      'ImagePullBackOff',
      (p) => container(p)?.state?.waiting?.reason === 'ImagePullBackOff',
    );
    expect(p.status?.phase).toBe('Pending');
    expect(container(p)?.state?.waiting?.message).toContain('Back-off pulling image "registry.example/app:1"');
    const events = await waitFor('a Failed event', 30_000, async () => {
      const list = await kube.core.listNamespacedEvent({
        namespace: kube.ns,
        fieldSelector: 'involvedObject.name=pull',
      });
      return list.items.some((e) => e.reason === 'Failed') ? list.items : undefined;
    });
    expect(events.find((e) => e.reason === 'Failed')?.type).toBe('Warning');
  });

  it('crash-loop: CrashLoopBackOff with the last exit code', async () => {
    await kube.core.createNamespacedPod({
      namespace: kube.ns,
      body: scenarioPod('crash', 'crash-loop', { 'sim.ferry.dev/exit-code': '3' }),
    });
    const p = await podWhen(
      'crash',
      'CrashLoopBackOff',
      (p) => container(p)?.state?.waiting?.reason === 'CrashLoopBackOff',
    );
    expect(container(p)?.lastState?.terminated?.exitCode).toBe(3);
    expect(container(p)?.lastState?.terminated?.reason).toBe('Error');
    expect(container(p)?.restartCount).toBeGreaterThan(0);
    expect(p.status?.conditions?.find((x) => x.type === 'Ready')?.status).toBe('False');
  });

  it('oom-killed: the last termination is OOMKilled with exit code 137', async () => {
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: scenarioPod('oom', 'oom-killed') });
    const p = await podWhen('oom', 'OOMKilled', (p) => container(p)?.lastState?.terminated?.reason === 'OOMKilled');
    expect(container(p)?.lastState?.terminated?.exitCode).toBe(137);
    expect(container(p)?.state?.waiting?.reason).toBe('CrashLoopBackOff');
  });

  it('never-ready: Running, containers started, never Ready', async () => {
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: scenarioPod('unready', 'never-ready') });
    const p = await podWhen('unready', 'Running', (p) => p.status?.phase === 'Running');
    expect(container(p)?.started).toBe(true);
    expect(container(p)?.ready).toBe(false);
    await new Promise((r) => setTimeout(r, 2_000));
    const later = await kube.core.readNamespacedPod({ name: 'unready', namespace: kube.ns });
    expect(container(later)?.ready).toBe(false);
  });

  it('per-pod delay: ready-delay (here as a label) holds a pod in ContainerCreating', async () => {
    const slow = scenarioPod('slow', 'normal');
    slow.metadata!.labels!['sim.ferry.dev/ready-delay'] = '4s';
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: slow });
    const pending = await podWhen(
      'slow',
      'ContainerCreating',
      (p) => container(p)?.state?.waiting?.reason === 'ContainerCreating',
    );
    const createdAt = Date.now();
    expect(pending.status?.phase).toBe('Pending');
    await podWhen('slow', 'Running', (p) => p.status?.phase === 'Running');
    expect(Date.now() - createdAt).toBeGreaterThan(2_500);
  });

  it('run-forever: a Job past activeDeadlineSeconds fails with DeadlineExceeded', async () => {
    const template = scenarioPod('x', 'run-forever');
    await kube.batch.createNamespacedJob({
      namespace: kube.ns,
      body: {
        metadata: { name: 'forever' },
        spec: {
          activeDeadlineSeconds: 3,
          backoffLimit: 2,
          template: { metadata: template.metadata, spec: { ...template.spec!, restartPolicy: 'Never' } },
        },
      },
    });
    const job = await waitFor('Job forever Failed', 60_000, async () => {
      const j = await kube.batch.readNamespacedJob({ name: 'forever', namespace: kube.ns });
      return j.status?.conditions?.find((x) => x.type === 'Failed' && x.status === 'True') ? j : undefined;
    });
    expect(job.status?.conditions?.find((x) => x.type === 'Failed')?.reason).toBe('DeadlineExceeded');
  });

  it('fail: a Job whose pods exit non-zero fails with BackoffLimitExceeded, the exit code on its pods', async () => {
    const template = scenarioPod('x', 'fail', {
      'sim.ferry.dev/exit-code': '2',
      'sim.ferry.dev/complete-delay': '200ms',
    });
    await kube.batch.createNamespacedJob({
      namespace: kube.ns,
      body: {
        metadata: { name: 'failing' },
        spec: {
          backoffLimit: 1,
          template: { metadata: template.metadata, spec: { ...template.spec!, restartPolicy: 'Never' } },
        },
      },
    });
    const job = await waitFor('Job failing Failed', 90_000, async () => {
      const j = await kube.batch.readNamespacedJob({ name: 'failing', namespace: kube.ns });
      return j.status?.conditions?.find((x) => x.type === 'Failed' && x.status === 'True') ? j : undefined;
    });
    expect(job.status?.conditions?.find((x) => x.type === 'Failed')?.reason).toBe('BackoffLimitExceeded');
    expect(job.status?.failed).toBe(2);
    const pods = await kube.core.listNamespacedPod({ namespace: kube.ns, labelSelector: 'job-name=failing' });
    expect(pods.items.map((p) => container(p)?.state?.terminated?.exitCode)).toEqual([2, 2]);
  });

  it('an unschedulable pod stays Pending with PodScheduled=False/Unschedulable from the real scheduler', async () => {
    const pod = restrictedPod('greedy');
    pod.spec!.containers[0]!.resources = { limits: { 'nvidia.com/gpu': '64' } };
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: pod });
    const p = await podWhen('greedy', 'Unschedulable', (p) =>
      Boolean(p.status?.conditions?.some((x) => x.type === 'PodScheduled' && x.reason === 'Unschedulable')),
    );
    expect(p.status?.conditions?.find((x) => x.type === 'PodScheduled')?.message).toContain(
      'Insufficient nvidia.com/gpu',
    );
  });
});
