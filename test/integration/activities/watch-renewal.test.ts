// The worker's watch over days, compressed: watches renewed every 10–20 s instead of 30–60 min, against the local API
// server through the fault proxy. Behind a proxy that holds a response's headers until its first body byte, a quiet
// watch has no headers until the bookmark the server sends just before it ends it; client-node's Watch gives up after
// 30 s ("network timeout") and Ferry's watch used to list again, over and over. Ferry's own watch request waits, and
// ends a watch itself only when the server is late to end it (a dead connection): then it goes on from where it was,
// without listing again.
import { Watch, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFaultProxy, type FaultProxy } from '../../../bench/chaos/fault-proxy.js';
import { Cluster } from '../../../activities/cluster/api.js';
import { ModelWatcher, type ModelChange, type WatchStats } from '../../../activities/cluster/model-watcher.js';
import { useNamespace } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';

const kube = useNamespace('act-watch-renewal');
const proxies: FaultProxy[] = [];
const watchers: ModelWatcher[] = [];
afterAll(async () => {
  await Promise.all(watchers.map((w) => w.stop()));
  for (const p of proxies) await p.close();
});

/** A watcher of the file's namespace through `proxy`, renewing each watch after 10–20 s. */
function watchThrough(proxy: FaultProxy, stallGraceMs = 5_000) {
  const kc = proxy.kubeConfig();
  const changes: ModelChange[] = [];
  const logs: string[] = [];
  const watcher = new ModelWatcher(kc, new Cluster(kc), {
    wake: async (change) => {
      changes.push(change);
    },
    watchSeconds: 10,
    stallGraceMs,
    restartMs: 500,
    log: (level, message, meta) => logs.push(`${level} ${message} ${JSON.stringify(meta)}`),
  });
  watchers.push(watcher);
  watcher.watchNamespace(kube.ns);
  return { kc, watcher, changes, logs };
}

/** A ConfigMap of model `model`, as Ferry labels its objects. */
const configMap = (name: string, model: string) => ({
  metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'ferry', 'ferry.dev/model': model } },
  data: { at: new Date().toISOString() },
});

const byKind = (stats: WatchStats[]) => Object.fromEntries(stats.map((s) => [s.kind, s.ends]));

/** How client-node's Watch ends on `path` from the collection's current resourceVersion: its error, or 'ended'. */
async function libraryWatch(kc: KubeConfig, path: string): Promise<string> {
  const list = await new Cluster(kc).objects.list('v1', 'ConfigMap', kube.ns);
  return await new Promise<string>((resolve) => {
    void new Watch(kc)
      .watch(
        path,
        { resourceVersion: list.metadata?.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: 50 },
        () => undefined,
        (err: unknown) => resolve(err instanceof Error ? err.message : err ? JSON.stringify(err) : 'ended'),
      )
      .catch((err: unknown) => resolve(String(err)));
  });
}

describe('the worker watch, renewed', { timeout: 150_000 }, () => {
  let held: FaultProxy;
  beforeAll(async () => {
    held = await startFaultProxy(kube.kc, { holdHeaders: true });
    proxies.push(held);
  });

  it('behind a proxy that holds headers, quiet watches renew on schedule without one failure, and still wake', async () => {
    const { kc, watcher, changes, logs } = watchThrough(held);
    // The cause, shown beside it: the library's watch of the same quiet collection gives up after 30 s.
    const library = libraryWatch(kc, `/api/v1/namespaces/${kube.ns}/configmaps`);
    const renewed = await waitFor('every kind renewed twice', 90_000, async () => {
      const stats = watcher.watchStats();
      return stats.length >= 6 && stats.every((s) => s.ends.renewed >= 2) ? stats : undefined;
    });
    for (const s of renewed) expect(s.ends, s.kind).toMatchObject({ cut: 0, stalled: 0, failed: 0 });
    expect(logs.filter((l) => l.startsWith('warn'))).toEqual([]);
    expect(await library).toMatch(/network timeout/);

    // After the renewals the watch still sees a change: the model is woken, naming its object.
    await kube.core.createNamespacedConfigMap({ namespace: kube.ns, body: configMap('quiet-root', 'quiet') });
    const woken = await waitFor('the model woken', 15_000, async () => changes.find((c) => c.name === 'quiet'));
    expect(woken.objects).toEqual(['ConfigMap/quiet-root']);
    expect(watcher.get('ConfigMap', kube.ns, 'quiet-root')).toBeTruthy();
  });

  it('ends a watch the server never answers once its time is past, and goes on from where it was', async () => {
    const proxy = await startFaultProxy(kube.kc);
    proxies.push(proxy);
    // The first watch of ConfigMaps is swallowed: no answer, no error, the connection open.
    proxy.script('hang', { watch: true, path: /\/configmaps\?/ }, 1);
    const { watcher, changes, logs } = watchThrough(proxy, 2_000);
    const stalled = await waitFor('the ConfigMap watch ended by the worker', 60_000, async () => {
      const stats = byKind(watcher.watchStats());
      return stats.ConfigMap?.stalled === 1 ? stats : undefined;
    });
    expect(stalled.ConfigMap).toMatchObject({ failed: 0, cut: 0 });
    expect(logs.filter((l) => l.includes('watch stalled'))).toHaveLength(1);
    // Went on from the list's resourceVersion: one LIST of ConfigMaps in all, and a change after it wakes the model.
    await kube.core.createNamespacedConfigMap({ namespace: kube.ns, body: configMap('late-root', 'late') });
    await waitFor('the model woken', 30_000, async () => changes.find((c) => c.name === 'late'));
    const lists = proxy.log().filter((r) => !r.watch && r.method === 'GET' && /\/configmaps(\?|$)/.test(r.path));
    expect(lists).toHaveLength(1);
  });
});

describe('the worker watch, waking', { timeout: 60_000 }, () => {
  it('sends a wake Temporal did not take again until it does, once logged', async () => {
    const proxy = await startFaultProxy(kube.kc);
    proxies.push(proxy);
    const kc = proxy.kubeConfig();
    const sent: ModelChange[] = [];
    const logs: string[] = [];
    let refusals = 2;
    const watcher = new ModelWatcher(kc, new Cluster(kc), {
      wake: async (change) => {
        if (change.name !== 'retried') return;
        if (refusals-- > 0) throw new Error('Temporal is away');
        sent.push(change);
      },
      log: (level, message) => logs.push(`${level} ${message}`),
    });
    watchers.push(watcher);
    watcher.watchNamespace(kube.ns);
    await waitFor('the watch synced', 20_000, async () => watcher.isSynced(kube.ns));
    await kube.core.createNamespacedConfigMap({ namespace: kube.ns, body: configMap('retried-root', 'retried') });
    // Refused twice (2 s, then 4 s apart), taken the third time.
    const [woken] = await waitFor('the wake taken', 30_000, async () => (sent.length ? sent : undefined));
    expect(woken).toEqual({ namespace: kube.ns, name: 'retried', objects: ['ConfigMap/retried-root'] });
    expect(refusals).toBe(-1);
    expect(logs.filter((l) => l.includes('could not wake'))).toEqual(['warn could not wake the model; trying again']);
  });
  it("wakes every model using a shared cache when the cache's volume changes", async () => {
    const kc = kube.kc;
    const sent: ModelChange[] = [];
    const watcher = new ModelWatcher(kc, new Cluster(kc), {
      wake: async (change) => {
        sent.push(change);
      },
    });
    watchers.push(watcher);
    watcher.watchNamespace(kube.ns);
    await waitFor('the watch synced', 20_000, async () => watcher.isSynced(kube.ns));
    // A cache's volume as Ferry labels it: no model's label, its users in an annotation.
    await kube.core.createNamespacedPersistentVolumeClaim({
      namespace: kube.ns,
      body: {
        metadata: {
          name: 'ferry-cache-0123456789ab',
          labels: {
            'app.kubernetes.io/managed-by': 'ferry',
            'app.kubernetes.io/component': 'storage',
            'ferry.dev/cache': '0123456789ab',
          },
          annotations: { 'ferry.dev/cache-users': 'first,second' },
        },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
      },
    });
    // (The watch's first list woke the models of this file's earlier tests: only the volume's wakes count.)
    const byVolume = () => sent.filter((c) => c.objects.includes('PersistentVolumeClaim/ferry-cache-0123456789ab'));
    await waitFor('both users woken', 15_000, async () => byVolume().length >= 2);
    expect(
      byVolume()
        .map((c) => c.name)
        .sort(),
    ).toEqual(['first', 'second']);
  });
});
