import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFaultProxy, type FaultKind, type RequestMatch } from '../../../bench/chaos/fault-proxy.js';
import { Cluster } from '../../../activities/cluster/api.js';
import { overrideEndpoints } from '../../../activities/cluster/endpoints.js';
import type { ProgressSink } from '../../../activities/cluster/progress.js';
import type { RetryNote } from '../../../activities/cluster/request-retry.js';
import { retryProgress } from '../../../activities/cluster/retry-progress.js';
import { waitFor } from '../../../activities/cluster/wait.js';
import { createActivities } from '../../../activities/create-activities.js';
import { FAILURE, type ServedModel, type StepProgress } from '../../../workflows/contract/index.js';
import { beginStep, foldProgress, initialStatus } from '../../../workflows/status/transitions.js';
import { rejectionOf, testDeps, testModel } from '../../support/activity-env.js';
import { prepareModel } from '../../support/engine-env.js';
import { useNamespace } from '../../support/fixtures.js';
import { serviceAccountWithRole, waitFor as eventually } from '../../support/kube.js';
import { repoRoot } from '../../support/local-env.js';

// The Kubernetes layer's per-request retries against the real API server, through the fault-injecting proxy
// (bench/chaos/fault-proxy.ts): transient failures are ridden out within one call, writes whose outcome is unknown
// are re-read rather than repeated blindly, what no retry fixes fails at once as before, and a retry shows as the
// step's waiting reason within seconds.
const env = useNamespace('act-retries');
let proxy: Awaited<ReturnType<typeof startFaultProxy>>;

beforeAll(async () => {
  proxy = await startFaultProxy(env.kc, { seed: 7, cutWatchMs: [200, 400] });
});
afterAll(async () => {
  await proxy?.close();
});

/** A Cluster that talks to the API server through the proxy; hung requests give up after 1 s. */
const viaProxy = (options: ConstructorParameters<typeof Cluster>[1] = {}) =>
  new Cluster(proxy.kubeConfig(), { requestTimeoutMs: 1_000, ...options });

const configMap = (name: string, data: Record<string, string> = { v: '1' }): V1ConfigMap => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: env.ns },
  data,
});
const cmRef = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', name, namespace: env.ns });
const readCm = (name: string) => env.core.readNamespacedConfigMap({ name, namespace: env.ns });
const gone = async (name: string) =>
  readCm(name).then(
    () => false,
    () => true,
  );
/** The proxy's log for one object (its path with `/name`, the collection's with `metadata.name=name`). */
const requestsFor = (name: string) =>
  proxy.log().filter((r) => r.path.includes(`/${name}`) || r.path.includes(`metadata.name%3D${name}`));
const timed = async <T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> => {
  const start = Date.now();
  const value = await fn();
  return { value, ms: Date.now() - start };
};

/** A ProgressSink that keeps what it was sent, with when. */
function capturingSink() {
  const sent: { at: number; workflowId: string; progress: StepProgress }[] = [];
  const sink: ProgressSink = async ({ workflowId }, progress) =>
    void sent.push({ at: Date.now(), workflowId, progress });
  return { sent, sink };
}
/** Runs `fn` as activity `activityType` of workflow `workflowId`. */
function runAs<A extends unknown[], R>(activityType: string, fn: (...args: A) => Promise<R>, ...args: A) {
  const mock = new MockActivityEnvironment(
    {
      activityType,
      workflowExecution: { workflowId: `wf-${activityType}`, runId: 'run' },
      // A first attempt scheduled now: budgets (awaitHealth's startup) start here.
      scheduledTimestampMs: Date.now(),
      currentAttemptScheduledTimestampMs: Date.now(),
    },
    { logger: new DefaultLogger('ERROR') },
  );
  const result = mock.run<A, R, typeof fn>(fn, ...args);
  result.catch(() => undefined);
  return { mock, result };
}

describe('transient failures are ridden out within the call', () => {
  it('a 429 with Retry-After: 1 is retried after at least a second, and the call succeeds', async () => {
    await env.core.createNamespacedConfigMap({ namespace: env.ns, body: configMap('throttled') });
    const notes: RetryNote[] = [];
    const cluster = viaProxy({ onRetry: (n) => notes.push(n) });
    proxy.script('http429', { method: 'GET', path: `/api/v1/namespaces/${env.ns}/configmaps/throttled` });
    const { value, ms } = await timed(() => cluster.get<V1ConfigMap>(cmRef('throttled')));
    expect(value?.data).toEqual({ v: '1' });
    expect(ms).toBeGreaterThanOrEqual(1_000);
    expect(ms).toBeLessThan(3_000);
    expect(requestsFor('throttled').map((r) => r.fault ?? 'ok')).toEqual(['http429', 'ok']);
    expect(notes).toEqual([
      expect.objectContaining({
        doing: `reading ConfigMap ${env.ns}/throttled`,
        reason: 'KubernetesHttp429',
        attempt: 1,
        delayMs: expect.any(Number),
      }),
    ]);
    expect(notes[0]!.delayMs).toBeGreaterThanOrEqual(1_000);
    expect(notes[0]!.message).toMatch(/: too many requests/);
  });

  it('500, 503, resets and hangs on GET, LIST, apply and DELETE are ridden out', async () => {
    const cluster = viaProxy();
    const kinds: FaultKind[] = ['http500', 'http503', 'resetBefore', 'hang'];
    for (const kind of kinds) {
      const name = `ridden-${kind.toLowerCase()}`;
      const path = `/api/v1/namespaces/${env.ns}/configmaps/${name}`;

      proxy.script(kind, { method: 'PATCH', path });
      const applied = await cluster.apply(configMap(name), 'ferry');
      expect(applied.metadata?.uid).toBeTruthy();

      proxy.script(kind, { method: 'GET', path });
      expect((await cluster.get<V1ConfigMap>(cmRef(name)))?.metadata?.uid).toBe(applied.metadata?.uid);

      proxy.script(kind, { method: 'GET', path: `/api/v1/namespaces/${env.ns}/configmaps?` });
      const listed = await cluster.list<V1ConfigMap>('v1', 'ConfigMap', env.ns, {
        fieldSelector: `metadata.name=${name}`,
      });
      expect(listed.map((c) => c.metadata?.name)).toEqual([name]);

      proxy.script(kind, { method: 'DELETE', path });
      expect(await cluster.delete(cmRef(name), 'Background', { uid: applied.metadata?.uid })).toBe(true);
      expect(await gone(name)).toBe(true);

      const faults = requestsFor(name).filter((r) => r.fault === kind);
      expect(faults.map((r) => r.method)).toEqual(['PATCH', 'GET', 'GET', 'DELETE']);
    }
  });

  it('an apply whose answer was lost is applied again (idempotent); a delete whose answer was lost is done', async () => {
    const cluster = viaProxy();
    const path = `/api/v1/namespaces/${env.ns}/configmaps/lost-answer`;
    proxy.script('resetAfter', { method: 'PATCH', path });
    const applied = await cluster.apply(configMap('lost-answer', { v: '2' }), 'ferry');
    expect(applied.data).toEqual({ v: '2' });
    proxy.script('resetAfter', { method: 'DELETE', path });
    expect(await cluster.delete(cmRef('lost-answer'), 'Background', { uid: applied.metadata?.uid })).toBe(true);
    expect(requestsFor('lost-answer').map((r) => `${r.method} ${r.fault ?? 'ok'}`)).toEqual([
      'PATCH resetAfter',
      'PATCH ok',
      'DELETE resetAfter',
      // 404: the first delete did it.
      'DELETE ok',
    ]);
    expect(await gone('lost-answer')).toBe(true);
  });

  it('a 409 on a delete whose preconditions still hold is retried; a precondition that fails still fails', async () => {
    const cluster = viaProxy();
    const created = await env.core.createNamespacedConfigMap({ namespace: env.ns, body: configMap('conflicted') });
    proxy.script('conflict409', { method: 'DELETE', path: `/api/v1/namespaces/${env.ns}/configmaps/conflicted` });
    expect(await cluster.delete(cmRef('conflicted'), 'Background', { uid: created.metadata?.uid })).toBe(true);
    expect(requestsFor('conflicted').map((r) => `${r.method} ${r.fault ?? 'ok'}`)).toEqual([
      'DELETE conflict409',
      'GET ok',
      'DELETE ok',
    ]);

    // The name now belongs to another object: the real 409, as before.
    const stale = created.metadata!.uid!;
    await env.core.createNamespacedConfigMap({ namespace: env.ns, body: configMap('conflicted') });
    const err = await rejectionOf(cluster.delete(cmRef('conflicted'), 'Background', { uid: stale }));
    expect(err).toMatchObject({ type: 'KubernetesHttp409', nonRetryable: false });
    expect(await gone('conflicted')).toBe(false);
  });
});

describe('a write whose outcome is unknown is re-read, not repeated blindly', () => {
  it('a create whose answer was lost returns the object it created', async () => {
    const cluster = viaProxy();
    proxy.script('resetAfter', { method: 'POST', path: `/api/v1/namespaces/${env.ns}/configmaps` });
    const created = await cluster.create(configMap('created-once', { v: 'created' }));
    expect(created.metadata?.name).toBe('created-once');
    expect((await readCm('created-once')).metadata?.uid).toBe(created.metadata?.uid);
    const posts = proxy.log().filter((r) => r.method === 'POST' && r.path.endsWith(`/namespaces/${env.ns}/configmaps`));
    expect(posts.map((r) => r.fault ?? 'ok')).toEqual(['resetAfter']);
    expect(requestsFor('created-once').map((r) => r.method)).toEqual(['GET']);
  });

  it('a conditional merge patch whose answer was lost is found applied and not sent again', async () => {
    const cluster = viaProxy();
    const before = await env.core.createNamespacedConfigMap({ namespace: env.ns, body: configMap('patched-once') });
    proxy.script('resetAfter', { method: 'PATCH', path: `/api/v1/namespaces/${env.ns}/configmaps/patched-once` });
    const patched = await cluster.mergePatch<V1ConfigMap>(cmRef('patched-once'), {
      metadata: { resourceVersion: before.metadata?.resourceVersion, labels: { patched: 'yes' } },
      data: { v: null, w: '2' },
    });
    expect(patched.data).toEqual({ w: '2' });
    expect(patched.metadata?.labels).toEqual({ patched: 'yes' });
    // One change on the server: the patch was not repeated (a repeat would have been a 409 with the old version).
    const after = await readCm('patched-once');
    expect(after.metadata?.resourceVersion).toBe(patched.metadata?.resourceVersion);
    expect(requestsFor('patched-once').map((r) => `${r.method} ${r.fault ?? 'ok'}`)).toEqual([
      'PATCH resetAfter',
      'GET ok',
    ]);
  });

  it('a request that hangs again and again gets twice as long on each retry, so a slow server is still heard', async () => {
    const cluster = viaProxy({ requestTimeoutMs: 300, hedgeReadsAfterMs: Infinity });
    await env.core.createNamespacedConfigMap({ namespace: env.ns, body: configMap('hung-twice') });
    proxy.script('hang', { method: 'GET', path: `/api/v1/namespaces/${env.ns}/configmaps/hung-twice` }, 2);
    const { value, ms } = await timed(() => cluster.get<V1ConfigMap>(cmRef('hung-twice')));
    expect(value?.data).toEqual({ v: '1' });
    expect(requestsFor('hung-twice').map((r) => r.fault ?? 'ok')).toEqual(['hang', 'hang', 'ok']);
    const [first, second, third] = requestsFor('hung-twice').map((r) => r.at);
    // 300 ms, then 600 ms, each followed by a backoff of up to 0.2 s and 0.4 s.
    expect(second! - first!).toBeGreaterThanOrEqual(290);
    expect(second! - first!).toBeLessThan(300 + 200 + 150);
    expect(third! - second!).toBeGreaterThanOrEqual(590);
    expect(third! - second!).toBeLessThan(600 + 400 + 150);
    expect(ms).toBeLessThan(2_500);
  });

  it('a read or a delete unanswered after 500 ms is sent once more and the first answer wins: a hang costs 0.5 s, not the timeout', async () => {
    const cluster = viaProxy({ requestTimeoutMs: 5_000 });
    await env.core.createNamespacedConfigMap({ namespace: env.ns, body: configMap('hedged') });
    proxy.script('hang', { method: 'GET', path: `/api/v1/namespaces/${env.ns}/configmaps/hedged` });
    const { value, ms } = await timed(() => cluster.get<V1ConfigMap>(cmRef('hedged')));
    expect(value?.data).toEqual({ v: '1' });
    expect(requestsFor('hedged').map((r) => r.fault ?? 'ok')).toEqual(['hang', 'ok']);
    // The second is sent 500 ms after the first was; the proxy notes each when it arrives, and on a busy machine the
    // first (a new connection) can arrive a moment late: not at once, and well before the 5 s bound.
    const [first, second] = requestsFor('hedged').map((r) => r.at);
    expect(second! - first!).toBeGreaterThanOrEqual(300);
    expect(second! - first!).toBeLessThan(900);
    expect(ms).toBeLessThan(1_500);

    // A write is never sent twice this way: a hung apply waits for its time bound, then is retried.
    const writes = viaProxy({ requestTimeoutMs: 800 });
    const path = `/api/v1/namespaces/${env.ns}/configmaps/hedged`;
    proxy.script('hang', { method: 'PATCH', path });
    await writes.apply(configMap('hedged', { v: '2' }), 'ferry');
    const patches = requestsFor('hedged').filter((r) => r.method === 'PATCH');
    expect(patches.map((r) => r.fault ?? 'ok')).toEqual(['hang', 'ok']);
    expect(patches[1]!.at - patches[0]!.at).toBeGreaterThanOrEqual(790);

    // A delete is hedged like a read: sent twice, it is done once (the second finds the object gone or going).
    proxy.script('hang', { method: 'DELETE', path });
    const current = await cluster.get<V1ConfigMap>(cmRef('hedged'));
    const deleting = await timed(() => cluster.delete(cmRef('hedged'), 'Background', { uid: current?.metadata?.uid }));
    const deletes = requestsFor('hedged').filter((r) => r.method === 'DELETE');
    expect(deletes.map((r) => r.fault ?? 'ok')).toEqual(['hang', 'ok']);
    expect(deletes[1]!.at - deletes[0]!.at).toBeLessThan(900);
    expect(deleting.ms).toBeLessThan(1_500);
    expect(await cluster.get(cmRef('hedged'))).toBeUndefined();
  });

  it('a merge patch that never reached the server (a hang) is re-read, found missing and sent again', async () => {
    const cluster = viaProxy();
    const before = await env.core.createNamespacedConfigMap({ namespace: env.ns, body: configMap('patched-late') });
    proxy.script('hang', { method: 'PATCH', path: `/api/v1/namespaces/${env.ns}/configmaps/patched-late` });
    const patched = await cluster.mergePatch<V1ConfigMap>(cmRef('patched-late'), {
      metadata: { resourceVersion: before.metadata?.resourceVersion },
      data: { v: '2' },
    });
    expect(patched.data).toEqual({ v: '2' });
    expect(requestsFor('patched-late').map((r) => `${r.method} ${r.fault ?? 'ok'}`)).toEqual([
      'PATCH hang',
      'GET ok',
      'PATCH ok',
    ]);
  });

  it('a 409 after an attempt of unknown outcome is re-read: a patch that is not there still fails as a conflict', async () => {
    const cluster = viaProxy();
    const before = await env.core.createNamespacedConfigMap({ namespace: env.ns, body: configMap('patched-never') });
    const path = `/api/v1/namespaces/${env.ns}/configmaps/patched-never`;
    proxy.script('hang', { method: 'PATCH', path });
    proxy.script('conflict409', { method: 'PATCH', path });
    const err = await rejectionOf(
      cluster.mergePatch(cmRef('patched-never'), {
        metadata: { resourceVersion: before.metadata?.resourceVersion },
        data: { v: '2' },
      }),
    );
    expect(err).toMatchObject({ type: 'KubernetesHttp409', nonRetryable: false });
    expect(requestsFor('patched-never').map((r) => `${r.method} ${r.fault ?? 'ok'}`)).toEqual([
      'PATCH hang',
      'GET ok',
      'PATCH conflict409',
      'GET ok',
    ]);
    expect((await readCm('patched-never')).data).toEqual({ v: '1' });
  });
});

describe('what retries cannot fix fails as before', () => {
  it('a 422 fails at once, KubernetesRejected', async () => {
    const cluster = viaProxy();
    const { value: err, ms } = await timed(() =>
      rejectionOf(cluster.apply(configMap('invalid', { 'not a key!': 'x' }), 'ferry')),
    );
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: FAILURE.KubernetesRejected, nonRetryable: true });
    expect(ms).toBeLessThan(1_000);
    expect(requestsFor('invalid').map((r) => r.method)).toEqual(['PATCH']);
  });

  it('a 403 fails at once, Forbidden', async () => {
    const kc = await serviceAccountWithRole(env, env.ns, 'reader', 'pods-only', [
      { apiGroups: [''], resources: ['pods'], verbs: ['get'] },
    ]);
    const restricted = await startFaultProxy(kc);
    try {
      const cluster = new Cluster(restricted.kubeConfig(), { requestTimeoutMs: 1_000 });
      const { value: err, ms } = await timed(() => rejectionOf(cluster.get(cmRef('anything'))));
      expect(err).toMatchObject({ type: FAILURE.Forbidden, nonRetryable: true });
      expect(ms).toBeLessThan(1_000);
      expect(restricted.log().filter((r) => r.path.includes('/configmaps/'))).toHaveLength(1);
      // The proxy's credentials are the ServiceAccount's: what it may do works.
      expect(await cluster.get({ apiVersion: 'v1', kind: 'Pod', name: 'none', namespace: env.ns })).toBeUndefined();
    } finally {
      await restricted.close();
    }
  });

  it('a fault storm longer than the time bound fails with the retryable type a single failure had', async () => {
    const cluster = viaProxy({ retry: { budgetMs: 2_000 } });
    const storms: [FaultKind, string][] = [
      ['http503', 'KubernetesHttp503'],
      ['http429', 'KubernetesHttp429'],
      ['resetBefore', FAILURE.KubernetesUnreachable],
      ['hang', FAILURE.KubernetesUnreachable],
    ];
    await env.core.createNamespacedConfigMap({ namespace: env.ns, body: configMap('stormy') });
    for (const [kind, type] of storms) {
      const path = `/api/v1/namespaces/${env.ns}/configmaps/stormy`;
      const before = requestsFor('stormy').length;
      const stop = proxy.script(kind, { method: 'GET', path }, 1_000);
      const { value: err, ms } = await timed(() => rejectionOf(cluster.get(cmRef('stormy'))));
      stop();
      expect(err).toMatchObject({ type, nonRetryable: false });
      // Retried for the bound (2 s), then given up; after a 429 at 1 s, less than the Retry-After (1 s) is left.
      expect(ms).toBeGreaterThanOrEqual(kind === 'http429' ? 1_000 : 1_900);
      expect(ms).toBeLessThan(2_000 + 1_500);
      expect(requestsFor('stormy').length - before).toBeGreaterThan(1);
      // As before: the activity's retry waits for what the server asked.
      if (kind === 'http429') expect((err as unknown as ApplicationFailure).nextRetryDelay).toBe(1_000);
    }
  });
});

describe('watches', () => {
  it('a cut watch stream is re-established at once, and the wait ends as soon as the change comes', async () => {
    const cluster = viaProxy();
    await env.core.createNamespacedConfigMap({ namespace: env.ns, body: configMap('watched') });
    const watchPath = `/api/v1/namespaces/${env.ns}/configmaps`;
    proxy.script('cutWatch', { watch: true, path: `${watchPath}?` }, 3);
    const wait = waitFor(cluster, {
      // No tick before the test ends: only the watch can wake the wait.
      pollMs: 120_000,
      signal: new AbortController().signal,
      watches: [{ path: watchPath, query: { fieldSelector: 'metadata.name=watched' } }],
      check: async () => ((await cluster.get<V1ConfigMap>(cmRef('watched')))?.data?.v === '2' ? true : undefined),
    });
    const watches = () => requestsFor('watched').filter((r) => r.watch);
    await eventually('three cut watches and a fourth one', 10_000, async () => watches().length >= 4);
    expect(watches().map((r) => r.fault ?? 'ok')).toEqual(['cutWatch', 'cutWatch', 'cutWatch', 'ok']);
    const changedAt = Date.now();
    await env.cluster.mergePatch(cmRef('watched'), { data: { v: '2' } });
    expect(await wait).toBe(true);
    expect(Date.now() - changedAt).toBeLessThan(2_000);
  });

  it('a watch that cannot be established is tried again on the next tick, not in a tight loop', async () => {
    const cluster = viaProxy();
    const watchPath = `/api/v1/namespaces/${env.ns}/configmaps`;
    const stop = proxy.script('http503', { watch: true, path: `${watchPath}?` }, 1_000);
    const start = Date.now();
    let checks = 0;
    const result = await waitFor(cluster, {
      pollMs: 500,
      signal: new AbortController().signal,
      watches: [{ path: watchPath, query: { fieldSelector: 'metadata.name=unwatchable' } }],
      check: async () => (++checks > 1 && Date.now() - start > 3_000 ? true : undefined),
    });
    expect(result).toBe(true);
    const tries = requestsFor('unwatchable').filter((r) => r.watch);
    expect(tries.every((r) => r.fault === 'http503')).toBe(true);
    // One at the start and one per tick (500 ms): about seven in 3 s.
    expect(tries.length).toBeGreaterThanOrEqual(2);
    expect(tries.length).toBeLessThan(12);
    stop();
  });
});

describe('status', () => {
  it("a retried request shows within seconds as the step's waiting reason, at most every 2 s", async () => {
    const { sent, sink } = capturingSink();
    const cluster = viaProxy({ onRetry: retryProgress(sink) });
    const acts = createActivities({ ...testDeps(), cluster, progress: sink });
    const model = testModel('retry-claim', env.ns);
    proxy.script('http429', { method: 'GET', path: new RegExp(`/namespaces/${env.ns}/[a-z]+/retry-claim`) }, 12);
    const start = Date.now();
    const { result } = runAs('claimName', acts.claimName, { model });
    const claim = await result;
    expect(claim.rootUid).toBeTruthy();
    expect(sent.length).toBeGreaterThanOrEqual(1);
    expect(sent[0]!.at - start).toBeLessThan(1_000);
    expect(sent[0]).toMatchObject({
      workflowId: 'wf-claimName',
      progress: {
        step: 'claim',
        state: 'KubernetesHttp429',
        message: expect.stringMatching(
          /^reading \w+ .*retry-claim.*: too many requests.*\(retry 1, next in 1\.\d s\)$/,
        ),
      },
    });
    for (let i = 1; i < sent.length; i++) expect(sent[i]!.at - sent[i - 1]!.at).toBeGreaterThanOrEqual(1_990);
    // More requests were retried than reported.
    expect(proxy.log().filter((r) => r.fault === 'http429' && r.path.includes('retry-claim')).length).toBeGreaterThan(
      sent.length,
    );
  });

  it("the step's next report of its own clears it", async () => {
    const model = testModel('retry-rollout', env.ns, { labels: { 'sim.ferry.dev/engine-scenario': 'never-ready' } });
    const rootUid = await prepareModel(model, env.cluster);
    const admin = createActivities({ ...testDeps(), cluster: env.cluster });
    const { generation } = await runAs('applyEngine', admin.applyEngine, { model, rootUid, sourceHash: 'x' }).result;

    const { sent, sink } = capturingSink();
    const cluster = viaProxy({ onRetry: retryProgress(sink) });
    const acts = createActivities({ ...testDeps(), cluster, progress: sink });
    proxy.script('http503', { method: 'GET', path: `/apis/apps/v1/namespaces/${env.ns}/deployments/retry-rollout` }, 2);
    const run = runAs('awaitRollout', acts.awaitRollout, { model, generation });
    const heartbeats: StepProgress[] = [];
    run.mock.on('heartbeat', (d: StepProgress) => heartbeats.push(d));
    const own = (p: StepProgress) => !p.state.startsWith('Kubernetes');
    await eventually('a retry report, then one of the step itself', 20_000, async () => {
      const first = sent.findIndex((s) => s.progress.state === 'KubernetesHttp503');
      return first >= 0 && sent.slice(first + 1).some((s) => own(s.progress));
    });
    run.mock.cancel();
    await rejectionOf(run.result);

    // As the workflow folds them into status: waiting for the API server, then not any more.
    let status = beginStep(
      initialStatus(model, new Date().toISOString()),
      'rollout',
      generation,
      new Date().toISOString(),
    );
    const waiting: (string | undefined)[] = [];
    for (const { progress } of sent) {
      status = foldProgress(status, progress, 'rollout', new Date().toISOString());
      waiting.push(status.waiting?.reason);
    }
    expect(sent[0]!.progress).toMatchObject({ step: 'rollout', state: 'KubernetesHttp503' });
    expect(sent[0]!.progress.message).toMatch(/^reading Deployment .*retry-rollout: the server is currently unable/);
    expect(waiting[0]).toBe('KubernetesHttp503');
    expect(waiting.at(-1)).not.toBe('KubernetesHttp503');
    // Heartbeats (what a retried attempt resumes from) carry only the step's own reports.
    expect(heartbeats.length).toBeGreaterThan(0);
    expect(heartbeats.filter((h) => !own(h))).toEqual([]);
  });
});

describe('a model life at 20 % injected faults', () => {
  const overrides = join(repoRoot, '.ferry/run/endpoints.json');
  const endpoints = overrideEndpoints(() => JSON.parse(readFileSync(overrides, 'utf8')) as Record<string, string>);

  /** Every activity of a model's life in order, each attempted until it succeeds (at most 3 times), timed. */
  async function life(cluster: Cluster, model: ServedModel) {
    const acts = createActivities({ ...testDeps(), cluster, endpoints });
    const failures: string[] = [];
    let attempts = 0;
    let steps = 0;
    const step = async <R>(name: string, run: () => Promise<R>): Promise<R> => {
      steps++;
      for (let i = 1; ; i++) {
        attempts++;
        try {
          return await runAs(name, run).result;
        } catch (err) {
          failures.push(`${name}: ${(err as Error).message}`);
          if (i === 3) throw err;
        }
      }
    };
    const start = Date.now();
    const claim = await step('claimName', () => acts.claimName({ model }));
    const input = { model, rootUid: claim.rootUid, sourceHash: claim.sourceHash };
    await step('applyStorage', () => acts.applyStorage(input));
    const { jobName } = await step('startPuller', () => acts.startPuller(input));
    await step('awaitPuller', () => acts.awaitPuller({ model, jobName }));
    await step('releaseVolume', () => acts.releaseVolume({ model, jobName, sourceHash: claim.sourceHash }));
    const { generation } = await step('applyEngine', () => acts.applyEngine(input));
    await step('awaitRollout', () => acts.awaitRollout({ model, generation }));
    const health = await step('awaitHealth', () => acts.awaitHealth({ model }));
    expect(health.models).toEqual([model.metadata.name]);
    expect(await step('readStatus', () => acts.readStatus({ model }))).toMatchObject({ readyReplicas: 1 });
    await step('scaleEngine', () => acts.scaleEngine({ model, replicas: 0 }));
    const teardown = await step('tearDown', () => acts.tearDown({ model }));
    expect(teardown.deleted).toEqual(expect.arrayContaining([`Deployment/${model.metadata.name}`]));
    return { ms: Date.now() - start, steps, attempts, failures };
  }

  const lifeModel = (name: string) =>
    testModel(name, env.ns, {
      labels: { 'sim.ferry.dev/load-delay-seconds': '1', 'sim.ferry.dev/complete-delay': '1s' },
      spec: { engine: { startupTimeout: '2m' } },
    });

  it('completes with every activity attempt succeeding', { timeout: 300_000 }, async () => {
    const cluster = viaProxy();
    proxy.set({ rate: 0 });
    const calm = await life(cluster, lifeModel('calm'));
    expect(calm.failures).toEqual([]);

    const injectedBefore = proxy.counts().injected;
    const requestsBefore = proxy.counts().requests;
    // One of each fault for sure (the first matching requests), then a fifth of all requests at random.
    const ours = new RegExp(`/namespaces/${env.ns}/.*stormy`);
    const sure: [FaultKind, RequestMatch][] = [
      ['http429', { method: 'GET', path: ours }],
      ['http503', { method: 'GET', path: ours }],
      ['resetBefore', { method: 'GET', path: ours }],
      ['hang', { method: 'GET', path: ours }],
      ['http500', { method: 'PATCH', path: ours }],
      ['conflict409', { method: 'PATCH', path: ours }],
      ['resetAfter', { method: 'PATCH', path: ours }],
      ['conflict409', { method: 'DELETE', path: ours }],
      ['resetAfter', { method: 'DELETE', path: ours }],
      ['cutWatch', { watch: true, path: new RegExp(`/namespaces/${env.ns}/`) }],
    ];
    for (const [kind, match] of sure) proxy.script(kind, match);
    proxy.set({ rate: 0.2, mix: {} });
    let stormy: Awaited<ReturnType<typeof life>>;
    try {
      stormy = await life(cluster, lifeModel('stormy'));
    } finally {
      proxy.set({ rate: 0 });
    }
    const counts = proxy.counts();
    const injected = Object.fromEntries(
      Object.entries(counts.injected).map(([k, n]) => [k, n - injectedBefore[k as FaultKind]]),
    );
    const total = Object.values(injected).reduce((a, b) => a + b, 0);
    console.log(
      `model life: ${calm.ms} ms without faults; ${stormy.ms} ms at 20 % ` +
        `(${(stormy.ms / calm.ms).toFixed(1)}×), ${total} faults in ${counts.requests - requestsBefore} requests ` +
        `${JSON.stringify(injected)}; ${stormy.attempts} activity attempts for ${stormy.steps} activities`,
    );
    expect(stormy.failures).toEqual([]);
    expect(stormy.attempts).toBe(stormy.steps);
    // The run met faults of every kind, and about a fifth of its requests failed.
    for (const kind of Object.keys(counts.injected)) expect(injected[kind]).toBeGreaterThan(0);
    expect(total).toBeGreaterThan(sure.length + 10);
  });
});

/** The kubeconfig file the proxy writes works like its KubeConfig (for a worker process in a chaos run). */
describe('the proxy', () => {
  it('writes a kubeconfig without credentials that reaches the API server through it', async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(proxy.writeKubeconfig());
    expect(kc.getCurrentUser()).toMatchObject({ name: 'fault-proxy' });
    expect(kc.getCurrentUser()?.certFile ?? kc.getCurrentUser()?.token).toBeUndefined();
    const before = proxy.counts().forwarded;
    const ns = await new Cluster(kc).get({ apiVersion: 'v1', kind: 'Namespace', name: env.ns });
    expect(ns?.metadata?.name).toBe(env.ns);
    expect(proxy.counts().forwarded).toBeGreaterThan(before);
  });
});
