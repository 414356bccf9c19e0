import { CancelledFailure } from '@temporalio/common';
import { afterEach, describe, expect, it } from 'vitest';
import { createEngineSim, type EngineSim } from '../../../deploy/engine-sim/server.js';
import { createActivities } from '../../../activities/create-activities.js';
import { FAILURE, type ServedModelInput } from '../../../workflows/contract/index.js';
import { overrideEndpoints } from '../../../activities/cluster/endpoints.js';
import { apiKeyFromSecret } from '../../../activities/steps/health.js';
import { activity, rejectionOf, runScheduled, testModel } from '../../support/activity-env.js';
import { annotateEnginePods, heartbeatWhere, prepareModel } from '../../support/engine-env.js';
import { useActivityEnv } from '../../support/fixtures.js';

// Readiness over HTTP. Simulated pods have no process behind their IPs, so each model's endpoint is overridden to
// an engine stand-in on 127.0.0.1 (what the local supervisor publishes); nothing is sent to a pod address. The
// Kubernetes half is real: only a ready replica of the current revision lets the HTTP check count.
const overrides: Record<string, string> = {};
const sims: EngineSim[] = [];
const env = useActivityEnv('act-health', {
  timing: { pollMs: 250 },
  deps: () => ({ endpoints: overrideEndpoints(() => overrides) }),
});
afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.stop()));
});

/** A stand-in engine on loopback, published as the model's endpoint override. */
async function standIn(model: string, options: Parameters<typeof createEngineSim>[0]): Promise<EngineSim> {
  const sim = createEngineSim({ port: 0, ...options });
  const { port } = await sim.start();
  sims.push(sim);
  overrides[`${env.ns}/${model}`] = `http://127.0.0.1:${port}`;
  return sim;
}

/** A model whose engine Deployment has rolled out (ready simulated pods, no GPU needed). */
async function rolledOut(
  name: string,
  spec: Partial<ServedModelInput['spec']> = {},
  labels: Record<string, string> = {},
) {
  const model = testModel(name, env.ns, { labels, spec: { resources: { gpus: 0 }, ...spec } });
  const rootUid = await prepareModel(model, env.cluster);
  const { generation } = await activity(env.acts.applyEngine, { model, rootUid, sourceHash: 'x' });
  await activity(env.acts.awaitRollout, { model, generation });
  return { model, rootUid };
}

/** The model `name` as `rolledOut` made it, with its engine pods in the KWOK scenario `scenario`. */
const inScenario = (name: string, scenario: string) =>
  testModel(name, env.ns, { labels: { 'sim.ferry.dev/engine-scenario': scenario }, spec: { resources: { gpus: 0 } } });

describe('awaitHealth', () => {
  it('reports Loading while /health answers 503, then is ready when /v1/models lists the served name', async () => {
    const { model } = await rolledOut('loader');
    await standIn('loader', { servedModelNames: ['loader'], loadDelaySeconds: 1.5 });
    const run = runScheduled(0, env.acts.awaitHealth, { model });
    const result = await run.result;
    expect(result).toEqual({ endpoint: overrides[`${env.ns}/loader`], models: ['loader'] });
    expect(run.heartbeats.some((h) => h.step === 'startup' && h.state === 'Loading' && h.readyReplicas === 1)).toBe(
      true,
    );
  });

  it('is not ready while /v1/models does not list the served name, and ends with StartupTimeout', async () => {
    const { model } = await rolledOut('misnamed', { engine: { startupTimeout: '3s' } });
    await standIn('misnamed', { servedModelNames: ['someone-else'], loadDelaySeconds: 0 });
    const run = runScheduled(0, env.acts.awaitHealth, { model });
    const err = await rejectionOf(run.result);
    expect(err).toMatchObject({ type: FAILURE.StartupTimeout, nonRetryable: true });
    expect(err.message).toMatch(
      /within engine\.startupTimeout \(3s\); last seen: ModelNotListed: .*someone-else.*misnamed/,
    );
    expect(run.heartbeats.at(-1)).toMatchObject({ step: 'startup', state: 'ModelNotListed' });
  });

  it('keeps the budget of the first attempt: a retry past it fails at once with what it saw', async () => {
    const { model } = await rolledOut('late', { engine: { startupTimeout: '5m' } });
    await standIn('late', { servedModelNames: ['late'], loadDelaySeconds: 600 });
    const started = Date.now();
    const err = await rejectionOf(runScheduled(6 * 60_000, env.acts.awaitHealth, { model }).result);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(err).toMatchObject({ type: FAILURE.StartupTimeout });
    expect(err.message).toContain('last seen: Loading');
  });

  it('settles for /health when /v1/models needs an API key the worker does not hold, and says so', async () => {
    await env.core.createNamespacedSecret({
      namespace: env.ns,
      body: { metadata: { name: 'keyed-key' }, stringData: { token: 's3cret' } },
    });
    const { model } = await rolledOut('keyed', { engine: { apiKeySecret: { name: 'keyed-key', key: 'token' } } });
    await standIn('keyed', { servedModelNames: ['keyed'], loadDelaySeconds: 0, apiKey: 's3cret' });

    const withoutKey = await runScheduled(0, env.acts.awaitHealth, { model }).result;
    expect(withoutKey.models).toEqual([]);
    expect(withoutKey.note).toMatch(/requires the API key .* \/health alone/);
    expect(JSON.stringify(withoutKey)).not.toContain('s3cret');

    const withKey = createActivities(env.deps, { apiKeys: apiKeyFromSecret(env.deps) });
    const result = await runScheduled(0, withKey.awaitHealth, { model }).result;
    expect(result).toEqual({ endpoint: overrides[`${env.ns}/keyed`], models: ['keyed'] });
  });

  it('a spec change is not Ready on the old revision’s replica, however healthy the endpoint', async () => {
    const { model, rootUid } = await rolledOut('revised');
    await standIn('revised', { servedModelNames: ['revised'], loadDelaySeconds: 0 });
    await runScheduled(0, env.acts.awaitHealth, { model }).result;

    const next = testModel('revised', env.ns, {
      labels: { 'sim.ferry.dev/engine-scenario': 'never-ready' },
      spec: { resources: { gpus: 0 } },
    });
    await activity(env.acts.applyEngine, { model: next, rootUid, sourceHash: 'x' });
    const run = runScheduled(0, env.acts.awaitHealth, { model: next });
    const beat = await heartbeatWhere(run, (h) => h.state === 'WaitingForReplica');
    expect(beat.message).toMatch(/no replica of the current revision is ready/);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(run.heartbeats.every((h) => h.state !== 'Loading')).toBe(true);
    run.env.cancel();
    expect(await rejectionOf(run.result)).toBeInstanceOf(CancelledFailure);
  });
});

describe('awaitHealth without fixed waits', () => {
  it('checks HTTP every 100 ms at first once a replica is ready, whatever the poll interval', async () => {
    const { model } = await rolledOut('quick');
    // /health answers 503 for 2 s, then 200: probed every 100 ms for the first 3 s, the wait ends a moment after
    // (checks doubling from 100 ms would come at 1.5 s and 3.1 s; one 10 s poll at 10 s).
    await standIn('quick', { servedModelNames: ['quick'], loadDelaySeconds: 2 });
    const slowPoll = createActivities({ ...env.deps, timing: { ...env.deps.timing, pollMs: 10_000 } });
    const started = Date.now();
    const result = await activity(slowPoll.awaitHealth, { model });
    expect(result.models).toEqual(['quick']);
    expect(Date.now() - started).toBeLessThan(2_900);
  });
});

describe('readStatus', () => {
  it('a healthy model: replicas, ready replicas, the endpoint and no problem', async () => {
    const { model } = await rolledOut('fine');
    await standIn('fine', { servedModelNames: ['fine'], loadDelaySeconds: 0 });
    expect(await activity(env.acts.readStatus, { model })).toEqual({
      replicas: 1,
      readyReplicas: 1,
      endpoint: overrides[`${env.ns}/fine`],
    });
  });

  it('a connection refused once (a backend that has just gone) is asked again: not Unhealthy', async () => {
    const { model } = await rolledOut('blip');
    await standIn('blip', { servedModelNames: ['blip'], loadDelaySeconds: 0 });
    let refused = 0;
    const flaky: typeof fetch = async (input, init) => {
      if (refused++ === 0) throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED') });
      return await fetch(input, init);
    };
    const acts = createActivities({ ...env.deps, http: flaky });
    expect(await activity(acts.readStatus, { model })).toEqual({
      replicas: 1,
      readyReplicas: 1,
      endpoint: overrides[`${env.ns}/blip`],
    });
    expect(refused).toBe(3);
  });

  it('an engine that stops answering is Unhealthy', async () => {
    const { model } = await rolledOut('silent');
    const sim = await standIn('silent', { servedModelNames: ['silent'], loadDelaySeconds: 0 });
    await sim.stop();
    const status = await activity(env.acts.readStatus, { model });
    expect(status.problem).toMatchObject({ reason: 'Unhealthy' });
    expect(status.problem!.message).toMatch(/^Unreachable: GET http:\/\/127\.0\.0\.1:\d+\/health failed/);
  });

  it('a revision that never becomes ready leaves replicas unavailable', async () => {
    const { rootUid } = await rolledOut('unready');
    await standIn('unready', { servedModelNames: ['unready'], loadDelaySeconds: 0 });
    const next = inScenario('unready', 'never-ready');
    await activity(env.acts.applyEngine, { model: next, rootUid, sourceHash: 'x' });
    await new Promise((r) => setTimeout(r, 2_500));
    const status = await activity(env.acts.readStatus, { model: next });
    expect(status).toMatchObject({ replicas: 1, readyReplicas: 0, problem: { reason: 'ReplicasUnavailable' } });
  });

  it('a crash-looping replica of the current revision is named as such', async () => {
    const { rootUid } = await rolledOut('relapse');
    await standIn('relapse', { servedModelNames: ['relapse'], loadDelaySeconds: 0 });
    const next = inScenario('relapse', 'crash-loop');
    await activity(env.acts.applyEngine, { model: next, rootUid, sourceHash: 'x', replicas: 0 });
    await annotateEnginePods(env.cluster, next, { 'sim.ferry.dev/exit-code': '2' });
    const { generation } = await activity(env.acts.applyEngine, { model: next, rootUid, sourceHash: 'x' });
    const err = await rejectionOf(activity(env.acts.awaitRollout, { model: next, generation }));
    expect(err).toMatchObject({ type: FAILURE.CrashLoopBackOff });
    const status = await activity(env.acts.readStatus, { model: next });
    expect(status.problem).toMatchObject({ reason: FAILURE.CrashLoopBackOff });
    expect(status.problem!.message).toMatch(/keeps crashing with exit code 2/);
  });
});
