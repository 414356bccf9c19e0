// Kubernetes Events on a model's root ConfigMap, against the real API server: posted as `kubectl describe` finds them
// (by the object's uid), and deduplicated as kubectl expects — the same note again is the same Event with a higher
// count, also from a worker that restarted in between.
import type { CoreV1Event } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { Cluster } from '../../../activities/cluster/api.js';
import { EventRecorder } from '../../../activities/cluster/events.js';
import { useNamespace } from '../../support/fixtures.js';

const kube = useNamespace('act-events');

describe('EventRecorder', () => {
  it('posts an Event on the root ConfigMap and counts a repeat on the same Event, across restarts', async () => {
    const root = await kube.core.createNamespacedConfigMap({
      namespace: kube.ns,
      body: { metadata: { name: 'qwen-ferry', namespace: kube.ns } },
    });
    const subject = { namespace: kube.ns, name: 'qwen', rootUid: root.metadata!.uid! };
    const warnings: string[] = [];
    const recorder = () => new EventRecorder(new Cluster(kube.kc), (m) => void warnings.push(m), 'test-worker');
    const ready = { type: 'Normal', reason: 'Ready', message: 'serving qwen (generation 1)' } as const;
    const first = recorder();
    await Promise.all([first.record(subject, ready), first.record(subject, ready)]);
    await recorder().record(subject, ready);
    await first.record(subject, { type: 'Warning', reason: 'Degraded', message: 'CrashLoopBackOff: restarted' });

    const list = await kube.core.listNamespacedEvent({
      namespace: kube.ns,
      fieldSelector: `involvedObject.name=qwen-ferry,involvedObject.uid=${root.metadata!.uid!}`,
    });
    const byReason = Object.fromEntries(list.items.map((e: CoreV1Event) => [e.reason, e]));
    expect(list.items).toHaveLength(2);
    expect(byReason.Ready).toMatchObject({
      type: 'Normal',
      count: 3,
      message: 'serving qwen (generation 1)',
      source: { component: 'ferry' },
      reportingComponent: 'ferry',
      involvedObject: { kind: 'ConfigMap', name: 'qwen-ferry', uid: root.metadata!.uid },
    });
    expect(byReason.Degraded).toMatchObject({ type: 'Warning', count: 1 });
    expect(warnings).toEqual([]);
  });

  it('logs a refused Event once per namespace and fails nothing', async () => {
    const warnings: string[] = [];
    const recorder = new EventRecorder(new Cluster(kube.kc), (m) => void warnings.push(m), 'test-worker');
    const subject = { namespace: 'no-such-namespace-for-events', name: 'qwen', rootUid: 'uid' };
    await recorder.record(subject, { type: 'Normal', reason: 'Ready', message: 'a' });
    await recorder.record(subject, { type: 'Normal', reason: 'Ready', message: 'b' });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^cannot post a Kubernetes Event/);
  });
});
