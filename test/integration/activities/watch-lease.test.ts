// Two workers' watches over one namespace, sharing the waking by the namespace's Lease: one wakes, the other keeps
// what it would have sent; when the holder is lost (its connections to the API server cut, its Lease kept), the other
// takes the Lease over after its 3 s (15 s in the worker) and sends what the holder could not. Every change is a wake,
// once. Real: the API server, its Leases and watches; the workers are two ModelWatchers in this process, each behind
// its own fault proxy.
import { afterAll, describe, expect, it } from 'vitest';
import { startFaultProxy, type FaultProxy } from '../../../bench/chaos/fault-proxy.js';
import { Cluster } from '../../../activities/cluster/api.js';
import { ModelWatcher, type ModelChange } from '../../../activities/cluster/model-watcher.js';
import { useNamespace } from '../../support/fixtures.js';
import { serviceAccountWithRole, waitFor } from '../../support/kube.js';

const kube = useNamespace('act-watch-lease');
const proxies: FaultProxy[] = [];
const watchers: ModelWatcher[] = [];
afterAll(async () => {
  await Promise.all(watchers.map((w) => w.stop()));
  for (const p of proxies) await p.close();
});

const LEASE = 'ferry-watch-lease-test';

/** A worker's watcher of the namespace, behind a proxy of its own, recording its wakes. */
async function worker(identity: string, wakes: { by: string; change: ModelChange }[], logs: string[]) {
  const proxy = await startFaultProxy(kube.kc);
  proxies.push(proxy);
  const kc = proxy.kubeConfig();
  const watcher = new ModelWatcher(kc, new Cluster(kc), {
    wake: async (change) => {
      wakes.push({ by: identity, change });
    },
    restartMs: 500,
    lease: { name: LEASE, identity, durationSeconds: 3, renewMs: 500 },
    log: (level, message, meta) => logs.push(`${identity} ${level} ${message} ${JSON.stringify(meta ?? {})}`),
  });
  watchers.push(watcher);
  watcher.watchNamespace(kube.ns);
  return { identity, proxy, watcher };
}

const configMap = (name: string, model: string) => ({
  metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'ferry', 'ferry.dev/model': model } },
});

describe('the worker watch, shared by a Lease', { timeout: 90_000 }, () => {
  it('wakes once per change with two workers, and once more when the holder is lost mid-change', async () => {
    const wakes: { by: string; change: ModelChange }[] = [];
    const logs: string[] = [];
    const a = await worker('worker-a', wakes, logs);
    const b = await worker('worker-b', wakes, logs);
    const holder = await waitFor('one of the two holding the Lease', 20_000, async () => {
      const holding = [a, b].filter((w) => w.watcher.wakes(kube.ns));
      return holding.length === 1 && a.watcher.isSynced(kube.ns) && b.watcher.isSynced(kube.ns)
        ? holding[0]
        : undefined;
    });
    const other = holder === a ? b : a;

    await kube.core.createNamespacedConfigMap({ namespace: kube.ns, body: configMap('one-root', 'one') });
    await waitFor('the first model woken', 10_000, async () => wakes.some((w) => w.change.name === 'one'));
    // Long enough for the other to see the holder renew after the change: what it kept of it is let go.
    await new Promise((r) => setTimeout(r, 4_000));

    // The holder is lost: its every connection to the API server cut, no new one taken, its Lease not given up.
    await holder.proxy.close();
    await kube.core.createNamespacedConfigMap({ namespace: kube.ns, body: configMap('two-root', 'two') });
    await waitFor('the other taking the Lease over', 15_000, async () => other.watcher.wakes(kube.ns));
    await waitFor('the second model woken', 10_000, async () => wakes.some((w) => w.change.name === 'two'));
    await new Promise((r) => setTimeout(r, 2_000));

    const lease = await kube.kc
      .makeApiClient((await import('@kubernetes/client-node')).CoordinationV1Api)
      .readNamespacedLease({ name: LEASE, namespace: kube.ns });
    expect(lease.spec).toMatchObject({ holderIdentity: other.identity, leaseTransitions: 1 });
    expect(wakes.map((w) => [w.by, w.change.name, w.change.objects])).toEqual([
      [holder.identity, 'one', ['ConfigMap/one-root']],
      [other.identity, 'two', ['ConfigMap/two-root']],
    ]);
    expect(logs.filter((l) => l.includes('took over'))).toEqual([
      expect.stringContaining(`${other.identity} info took over the Lease of the namespace`),
    ]);
  });

  it('wakes anyway where its Role may not use Leases, and says so once', async () => {
    const kc = await serviceAccountWithRole(kube, kube.ns, 'no-leases', 'no-leases', [
      {
        apiGroups: [''],
        resources: ['configmaps', 'persistentvolumeclaims', 'services', 'pods'],
        verbs: ['list', 'watch'],
      },
      { apiGroups: ['apps'], resources: ['deployments', 'replicasets'], verbs: ['list', 'watch'] },
    ]);
    const wakes: ModelChange[] = [];
    const logs: string[] = [];
    const watcher = new ModelWatcher(kc, new Cluster(kc), {
      wake: async (change) => {
        wakes.push(change);
      },
      lease: { name: 'ferry-watch-forbidden', identity: 'worker-c', durationSeconds: 3, renewMs: 500 },
      log: (level, message) => logs.push(`${level} ${message}`),
    });
    watchers.push(watcher);
    watcher.watchNamespace(kube.ns);
    await waitFor('waking without a Lease', 15_000, async () => watcher.isSynced(kube.ns) && watcher.wakes(kube.ns));
    await kube.core.createNamespacedConfigMap({ namespace: kube.ns, body: configMap('three-root', 'three') });
    await waitFor('the model woken', 10_000, async () => wakes.some((c) => c.name === 'three'));
    await new Promise((r) => setTimeout(r, 1_500));
    expect(logs.filter((l) => l.includes('may not use Leases'))).toEqual([
      'warn may not use Leases in the namespace: waking its models whatever other workers do',
    ]);
  });
});
