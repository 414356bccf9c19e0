import { Watch, type V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { useNamespace } from '../../support/fixtures.js';
import { restrictedPod, waitFor } from '../../support/kube.js';

// The real controllers (deployment, replicaset, job, endpointslice, PV binder, garbage collector) and the real
// scheduler act on these objects; KWOK only plays the kubelet of two simulated GPU nodes.
const kube = useNamespace('stack-workloads');

const labels = (app: string) => ({ app });

describe('workloads on the local cluster', () => {
  it('rolls out a Deployment to Available and gives its Service ready EndpointSlice endpoints', async () => {
    const pod = restrictedPod('x');
    await kube.apps.createNamespacedDeployment({
      namespace: kube.ns,
      body: {
        metadata: { name: 'web' },
        spec: {
          replicas: 2,
          selector: { matchLabels: labels('web') },
          template: {
            metadata: { labels: labels('web') },
            spec: {
              ...pod.spec!,
              containers: [{ ...pod.spec!.containers[0]!, ports: [{ name: 'http', containerPort: 8080 }] }],
            },
          },
        },
      },
    });
    await kube.core.createNamespacedService({
      namespace: kube.ns,
      body: {
        metadata: { name: 'web' },
        spec: { selector: labels('web'), ports: [{ name: 'http', port: 80, targetPort: 'http' }] },
      },
    });

    const dep = await waitFor('Deployment web Available', 60_000, async () => {
      const d = await kube.apps.readNamespacedDeployment({ name: 'web', namespace: kube.ns });
      const available = d.status?.conditions?.find((x) => x.type === 'Available');
      return available?.status === 'True' && d.status?.readyReplicas === 2 ? d : undefined;
    });
    expect(dep.status?.updatedReplicas).toBe(2);

    const endpoints = await waitFor('two ready endpoints', 60_000, async () => {
      const slices = await kube.discovery.listNamespacedEndpointSlice({
        namespace: kube.ns,
        labelSelector: 'kubernetes.io/service-name=web',
      });
      const ready = slices.items.flatMap((s) => s.endpoints ?? []).filter((e) => e.conditions?.ready);
      return ready.length === 2 ? ready : undefined;
    });
    expect(endpoints.every((e) => e.addresses.length === 1 && e.nodeName?.startsWith('gpu-node-'))).toBe(true);
  });

  it('runs a Job to completion', async () => {
    await kube.batch.createNamespacedJob({
      namespace: kube.ns,
      body: {
        metadata: { name: 'once' },
        spec: { backoffLimit: 0, template: { spec: { ...restrictedPod('x').spec!, restartPolicy: 'Never' } } },
      },
    });
    const job = await waitFor('Job once Complete', 60_000, async () => {
      const j = await kube.batch.readNamespacedJob({ name: 'once', namespace: kube.ns });
      return j.status?.conditions?.some((x) => x.type === 'Complete' && x.status === 'True') ? j : undefined;
    });
    expect(job.status?.succeeded).toBe(1);
  });

  it('binds a PVC of the default StorageClass and schedules a pod that mounts it', async () => {
    await kube.core.createNamespacedPersistentVolumeClaim({
      namespace: kube.ns,
      body: {
        metadata: { name: 'weights' },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '10Gi' } } },
      },
    });
    const pvc = await waitFor('PVC weights Bound', 60_000, async () => {
      const p = await kube.core.readNamespacedPersistentVolumeClaim({ name: 'weights', namespace: kube.ns });
      return p.status?.phase === 'Bound' ? p : undefined;
    });
    expect(pvc.spec?.storageClassName).toBe('kwok-volume');
    expect(pvc.status?.capacity?.storage).toBe('10Gi');

    const pod = restrictedPod('reader', { volumes: [{ name: 'w', persistentVolumeClaim: { claimName: 'weights' } }] });
    pod.spec!.containers[0]!.volumeMounts = [{ name: 'w', mountPath: '/models' }];
    await kube.core.createNamespacedPod({ namespace: kube.ns, body: pod });
    const running = await waitFor('pod reader Running', 60_000, async () => {
      const p = await kube.core.readNamespacedPod({ name: 'reader', namespace: kube.ns });
      return p.status?.phase === 'Running' ? p : undefined;
    });
    expect(running.spec?.nodeName).toMatch(/^gpu-node-/);
  });

  // A provisioner creates only the PV; the real PV controller binds. Each claim goes Pending → Bound and shows no other
  // phase on the way (a simulator that writes the claim in pieces let the controller mark fresh claims Lost), and a
  // deleted claim's volume goes with it (reclaim policy Delete).
  it('binds many claims at once straight from Pending to Bound, and deletes each volume with its claim', async () => {
    const names = Array.from({ length: 12 }, (_, i) => `burst-${i}`);
    const phases = new Map<string, string[]>();
    const watch = await new Watch(kube.kc).watch(
      `/api/v1/namespaces/${kube.ns}/persistentvolumeclaims`,
      { labelSelector: 'test=burst' },
      (_type: string, pvc: V1PersistentVolumeClaim) => {
        const seen = phases.get(pvc.metadata!.name!) ?? [];
        const phase = pvc.status?.phase ?? 'Pending';
        if (seen.at(-1) !== phase) seen.push(phase);
        phases.set(pvc.metadata!.name!, seen);
      },
      () => undefined,
    );
    try {
      await Promise.all(
        names.map((name) =>
          kube.core.createNamespacedPersistentVolumeClaim({
            namespace: kube.ns,
            body: {
              metadata: { name, labels: { test: 'burst' } },
              spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
            },
          }),
        ),
      );
      const bound = await waitFor('12 claims Bound', 60_000, async () => {
        const list = await kube.core.listNamespacedPersistentVolumeClaim({
          namespace: kube.ns,
          labelSelector: 'test=burst',
        });
        return list.items.filter((p) => p.status?.phase === 'Bound').length === names.length ? list.items : undefined;
      });
      await waitFor('the watch to see every claim Bound', 10_000, async () =>
        names.every((n) => phases.get(n)?.at(-1) === 'Bound'),
      );
      expect(Object.fromEntries(names.map((n) => [n, phases.get(n)]))).toEqual(
        Object.fromEntries(names.map((n) => [n, ['Pending', 'Bound']])),
      );
      const volumes = bound.map((p) => p.spec!.volumeName!);
      for (const p of bound) expect(p.spec?.volumeName).toBe(`pvc-${p.metadata!.uid}`);

      await kube.core.deleteCollectionNamespacedPersistentVolumeClaim({
        namespace: kube.ns,
        labelSelector: 'test=burst',
      });
      await waitFor('the 12 volumes deleted', 60_000, async () => {
        const pvs = await kube.core.listPersistentVolume();
        return !pvs.items.some((pv) => volumes.includes(pv.metadata!.name!));
      });
    } finally {
      watch.abort();
    }
  });

  it('garbage-collects the dependents of a deleted owner', async () => {
    const owner = await kube.core.createNamespacedConfigMap({
      namespace: kube.ns,
      body: { metadata: { name: 'owner' } },
    });
    const ownerReferences = [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: owner.metadata!.uid! }];
    await kube.core.createNamespacedConfigMap({
      namespace: kube.ns,
      body: { metadata: { name: 'dependent', ownerReferences } },
    });
    await kube.core.createNamespacedService({
      namespace: kube.ns,
      body: { metadata: { name: 'dependent-svc', ownerReferences }, spec: { ports: [{ port: 80 }] } },
    });

    await kube.core.deleteNamespacedConfigMap({ name: 'owner', namespace: kube.ns });
    await waitFor('dependents to be collected', 60_000, async () => {
      const cms = await kube.core.listNamespacedConfigMap({ namespace: kube.ns });
      const svcs = await kube.core.listNamespacedService({ namespace: kube.ns });
      const left = [...cms.items, ...svcs.items].map((o) => o.metadata?.name).filter((n) => n?.startsWith('dependent'));
      return left.length === 0;
    });
  });
});
