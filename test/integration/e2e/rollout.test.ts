// A canary on the whole path (docs/design/rollout.md): the CLI, a real worker process, the real control plane with
// KWOK nodes, and the local stack's supervisor, which plays each slot's engine pods with a stand-in and the front's
// pods with Debian's HAProxy and their own configuration. A client sends requests through the model's Service the
// whole time and counts them by the revision that answered: both answer during the 50 % step, which waits for
// `ferry rollout approve`, the new one alone after the promotion, the old one alone again after `ferry rollout undo`
// (from its kept volume, no pull), and no request fails, to the model or to its LoRA adapter, which each revision
// loads before its first request. A second canary is judged by a team's evaluation workflow on a worker of the team's,
// fails it, and rolls back, while Ferry's worker is killed (SIGKILL) at each of its steps and replaced; again no
// request fails.
import { request } from 'node:http';
import { join } from 'node:path';
import type { V1Deployment } from '@kubernetes/client-node';
import { NativeConnection, Worker } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ModelStatus } from '../../../workflows/contract/index.js';
import { expectOk, ferryJson, localUrls, modelObjects, uniqueCluster, type WorkerProcess } from '../../support/e2e.js';
import { runFerry, writeDoc } from '../../support/ferry-worker.js';
import { RESTRICTED, useNamespace, useWorkerProcesses } from '../../support/fixtures.js';
import { waitFor } from '../../support/kube.js';
import { readLocalEnv } from '../../support/local-env.js';
import type { Doc } from '../../support/workflow-harness.js';
import type { TeamActivities } from './fixtures/team-evaluation.js';

const kube = useNamespace('e2e-rollout', RESTRICTED);
const startWorkerProcess = useWorkerProcesses();
const cluster = uniqueCluster('e2e');

let worker: WorkerProcess;
beforeAll(async () => {
  worker = await startWorkerProcess(cluster);
}, 180_000);

const ref = (name: string) => [name, '-n', kube.ns, '--cluster', cluster];
const status = (name: string) => ferryJson<ModelStatus>(['status', ...ref(name)]);

function canaryDoc(name: string, revision: string, rollout: object = APPROVAL, adapters: string[] = []): Doc {
  const lora = adapters.length
    ? {
        enabled: true,
        adapters: adapters.map((a) => ({ name: a, source: { huggingface: { repo: `org/${a}-lora` } } })),
      }
    : {};
  return {
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: {
      name,
      namespace: kube.ns,
      labels: { 'sim.ferry.dev/load-delay-seconds': '1', 'sim.ferry.dev/complete-delay': '2s' },
    },
    spec: {
      cluster,
      source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision } },
      engine: { startupTimeout: '3m', lora },
      puller: { deadline: '5m' },
      front: { holdFor: '1m' },
      rollout,
    },
  };
}

const APPROVAL = { strategy: 'Canary', steps: [{ traffic: 50, gate: 'approval', timeout: '10m' }] };

/**
 * One completion on a connection of its own, as a client behind a Service with many connections sees it: a front pod
 * that stops finishes what it has and takes no new connection (a kept-alive one reused as it closes would be a race
 * of the client's connection pool, not of Ferry).
 */
function complete(url: string, model: string): Promise<{ status: number; revision: string }> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ model, prompt: 'a b', max_tokens: 2 });
    const req = request(
      `${url}/v1/completions`,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json' }, timeout: 90_000 },
      (res) => {
        res.resume();
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, revision: String(res.headers['x-ferry-revision'] ?? 'none') }),
        );
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('no answer in 90 s')));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Sends one request after another through the model's Service until stopped, naming each of `models` in turn (the base
 * model or a LoRA adapter); counts answers by revision.
 */
function steadyClient(name: string, models = [name]) {
  const byRevision: Record<string, number> = {};
  const failures: string[] = [];
  let stopped = false;
  const done = (async () => {
    for (let i = 0; !stopped; i++) {
      const url = localUrls()[`${kube.ns}/${name}`];
      const model = models[i % models.length]!;
      try {
        const { status, revision } = await complete(url!, model);
        if (status !== 200) failures.push(`HTTP ${status} for ${model} from ${revision}`);
        byRevision[revision] = (byRevision[revision] ?? 0) + 1;
      } catch (err) {
        // When, to match with the stack's logs (.ferry/run/logs): which step of the rollout the request met.
        failures.push(`${String(err)} at ${new Date().toISOString()}`);
      }
      // A few requests a second: enough to see both revisions answer, little load beside the other suites.
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  return {
    byRevision,
    failures,
    stop: async () => {
      stopped = true;
      await done;
    },
  };
}

describe('a canary rollout end to end', { timeout: 420_000 }, () => {
  it('moves a steady client from r1 to r2 through a 50 % step held for `ferry rollout approve`, and back by `ferry rollout undo`, with no failed request to the model or its LoRA adapter', async () => {
    const name = 'canary';
    const doc = (revision: string) => canaryDoc(name, revision, APPROVAL, ['sql']);
    expectOk(await runFerry(['serve', '-f', writeDoc(doc('main')), '--wait', '--timeout', '4m']), 'serve');
    await waitFor('the front answering', 60_000, async () => {
      const url = localUrls()[`${kube.ns}/${name}`];
      const res = url ? await fetch(`${url}/v1/models`).catch(() => undefined) : undefined;
      return res?.ok && res.headers.get('x-ferry-revision') === 'r1';
    });
    // Every other request names the adapter: each revision holds it before the front sends it one.
    const client = steadyClient(name, [name, 'sql']);
    try {
      // The new checkpoint: pulled into slot b while r1 serves, then half the requests, then all of them.
      const apply = runFerry(['apply', '-f', writeDoc(doc('v2')), '--wait', '--timeout', '5m']);
      const split = await waitFor('r2 taking its share, waiting for an approval', 240_000, async () => {
        const s = await status(name);
        return s.rollout?.awaiting ? s : undefined;
      });
      expect(split).toMatchObject({
        phase: 'Updating',
        revision: 'r1',
        rollout: { state: 'Progressing', traffic: 50 },
      });
      expect(split.conditions.find((c) => c.type === 'Ready')?.status).toBe('True');
      const shown = expectOk(await runFerry(['rollout', 'status', ...ref(name)]), 'rollout status');
      expect(shown.stdout).toContain('canary: r2 from r1, Canary, Progressing: step 1 of 2 at 50%');
      expect(shown.stdout).toContain('waiting for approval: ferry rollout approve canary');
      // Half the requests each, while the person looks.
      await waitFor('both revisions answering', 60_000, async () => (client.byRevision.r2 ?? 0) > 10);
      const approve = ['rollout', 'approve', ...ref(name), '--revision', 'r2', '--reason', 'looks good'];
      expect(expectOk(await runFerry(approve), 'rollout approve').stdout).toContain('r2 approved');
      expectOk(await apply, 'apply');
      const done = await status(name);
      expect(done).toMatchObject({
        phase: 'Ready',
        revision: 'r2',
        rollout: { state: 'Promoted', traffic: 100, gates: [{ gate: 'approval', result: 'Passed' }] },
        revisions: [
          { name: 'r2', role: 'current', slot: 'b', weight: 100 },
          { name: 'r1', role: 'previous', slot: 'a', weight: 0 },
        ],
        adapters: [{ name: 'sql', state: 'Loaded', loadedReplicas: 1, readyReplicas: 1 }],
      });
      expect(done.timeline.find((e) => e.generation === 2 && e.step === 'adapters')).toMatchObject({
        outcome: 'Succeeded',
        detail: 'r2: 1 of 1 adapters loaded on 1 replica',
      });
      const atPromotion = { ...client.byRevision };
      await waitFor('r2 alone answering', 90_000, async () => {
        const r2 = client.byRevision.r2 ?? 0;
        const r1 = client.byRevision.r1 ?? 0;
        await new Promise((r) => setTimeout(r, 4_000));
        return (client.byRevision.r2 ?? 0) > r2 + 5 && (client.byRevision.r1 ?? 0) === r1;
      });
      expect(atPromotion.r1).toBeGreaterThan(0);
      expect(atPromotion.r2).toBeGreaterThan(0);
      // r2's engine in slot b; r1's Deployment gone, its volume kept.
      const objects = await modelObjects(kube, kube.ns, name);
      expect(objects).toEqual(
        expect.arrayContaining(['Deployment/canary-b', 'Service/canary-b', 'PersistentVolumeClaim/canary-weights']),
      );
      await waitFor('r1 engine gone', 60_000, async () => {
        const left = await kube.apps.listNamespacedDeployment({
          namespace: kube.ns,
          labelSelector: 'ferry.dev/model=canary',
        });
        return left.items.every((d: V1Deployment) => d.metadata?.name !== 'canary');
      });

      // Back to r1: from the weights its volume kept (no pull), with no gate, the client served throughout.
      const undo = ['rollout', 'undo', ...ref(name), '--revision', 'r1', '--reason', 'r2 answers worse'];
      expect(expectOk(await runFerry(undo), 'rollout undo').stdout).toContain('returning to r1 at generation 3');
      const back = await waitFor('r1 serving again', 180_000, async () => {
        const s = await status(name);
        return s.phase === 'Ready' && s.observedGeneration === 3 ? s : undefined;
      });
      expect(back).toMatchObject({
        revision: 'r1',
        rollout: { revision: 'r1', from: 'r2', undo: true, state: 'Promoted' },
        revisions: [
          { name: 'r1', role: 'current', slot: 'a', weight: 100 },
          { name: 'r2', role: 'previous', slot: 'b', weight: 0 },
        ],
      });
      const undone = back.timeline.filter((e) => e.generation === 3).map((e) => `${e.step}:${e.outcome}`);
      expect(undone).toContain('download:Skipped');
      expect(undone).toContain('adapters:Succeeded');
      await waitFor('r1 alone answering again', 90_000, async () => {
        const r1 = client.byRevision.r1 ?? 0;
        const r2 = client.byRevision.r2 ?? 0;
        await new Promise((r) => setTimeout(r, 4_000));
        return (client.byRevision.r1 ?? 0) > r1 + 5 && (client.byRevision.r2 ?? 0) === r2;
      });
    } finally {
      await client.stop();
    }
    console.info('a steady client through the canary and its undo', {
      answeredBy: client.byRevision,
      failed: client.failures.length,
    });
    expect(client.failures).toEqual([]);
    expectOk(await runFerry(['delete', ...ref(name), '--wait']), 'delete');
    await waitFor(
      'every object of both slots gone',
      60_000,
      async () => (await modelObjects(kube, kube.ns, name)).length === 0,
    );
  });

  it("rolls back a canary the team's evaluation fails, with Ferry's worker killed at each step, and no failed request", async () => {
    const name = 'evaluated';
    const teamQueue = `team-evaluations-${cluster}`;
    const rollout = {
      strategy: 'Canary',
      evaluation: { workflow: 'scoreCandidate', taskQueue: teamQueue, timeout: '10m' },
      steps: [
        { traffic: 20, gate: 'health' },
        { traffic: 50, gate: 'evaluation' },
      ],
    };
    // The team's own worker, in this process: its evaluation workflow, and its activity that asks the candidate.
    const asked: { endpoint: string; slotB?: string }[] = [];
    const activities: TeamActivities = {
      async askCandidate({ endpoint, model }) {
        asked.push({ endpoint, slotB: localUrls()[`${kube.ns}/${name}-b`] });
        const res = await fetch(`${endpoint.replace(/\/v1\/?$/, '')}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model, prompt: 'a b', max_tokens: 2 }),
        });
        await res.arrayBuffer();
        return res.status;
      },
    };
    const connection = await NativeConnection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
    const team = await Worker.create({
      connection,
      namespace: 'default',
      taskQueue: teamQueue,
      workflowsPath: join(import.meta.dirname, 'fixtures', 'team-evaluation.ts'),
      activities,
    });
    const teamRunning = team.run();
    let client: ReturnType<typeof steadyClient> | undefined;
    const killed: string[] = [];
    try {
      const first = writeDoc(canaryDoc(name, 'main', rollout));
      expectOk(await runFerry(['serve', '-f', first, '--wait', '--timeout', '4m']), 'serve');
      await waitFor('the front answering', 60_000, async () => {
        const url = localUrls()[`${kube.ns}/${name}`];
        const res = url ? await fetch(`${url}/v1/models`).catch(() => undefined) : undefined;
        return res?.ok && res.headers.get('x-ferry-revision') === 'r1';
      });
      client = steadyClient(name);
      // The candidate's download and start take long enough (12 s, 15 s) to lose the worker in each.
      const next = canaryDoc(name, 'v2', rollout);
      next.metadata.labels['sim.ferry.dev/complete-delay'] = '12s';
      next.metadata.labels['sim.ferry.dev/load-delay-seconds'] = '15';
      expectOk(await runFerry(['apply', '-f', writeDoc(next)]), 'apply');

      /** Kills Ferry's worker (SIGKILL) once the rollout is at `what`, and starts another. */
      const killAt = async (what: string, at: (s: ModelStatus) => boolean) => {
        await waitFor(what, 240_000, async () => at(await status(name)));
        await worker.kill();
        worker = await startWorkerProcess(cluster);
        killed.push(what);
      };
      const open = (s: ModelStatus, steps: string[]) =>
        s.timeline.some((e) => e.generation === 2 && steps.includes(e.step) && !e.endedAt);
      await killAt("the candidate's download", (s) => open(s, ['download']));
      await killAt("the candidate's start", (s) => open(s, ['rollout', 'startup']));
      await killAt('the health gate at 20 %', (s) => s.rollout?.step === 1 && s.rollout.traffic === 20);
      await killAt('the evaluation', (s) => s.rollout?.evaluating !== undefined);
      const back = await waitFor('the candidate rolled back', 240_000, async () => {
        const s = await status(name);
        return s.rollout?.state === 'Aborted' && s.phase === 'Ready' ? s : undefined;
      });
      expect(back).toMatchObject({
        revision: 'r1',
        rollout: { revision: 'r2', state: 'Aborted', step: 2, traffic: 0 },
        revisions: [{ name: 'r1', role: 'current', slot: 'a', weight: 100 }],
      });
      expect(back.rollout!.gates.map((g) => [g.gate, g.result])).toEqual([
        ['health', 'Passed'],
        ['evaluation', 'Failed'],
      ]);
      // The health gate judged r2 on what the front's pods counted for it at 20 %.
      expect(back.rollout!.gates[0]!.message).toMatch(
        /^1 of 1 replicas ready and answering; through the front r2: 0 of [1-9]\d* requests failed \(0 %\)/,
      );
      expect(back.rollout!.gates[1]!.message).toBe(
        'score 0.41 below 0.9: r2 answered HTTP 200 on its own endpoint at 50%',
      );
      // It asked the candidate alone, on slot b's own Service, not through the front.
      expect(asked[0]!.slotB).toMatch(/^http:/);
      expect(asked[0]!.endpoint).toBe(asked[0]!.slotB);
      // Each step ran once to its end, across the restarts.
      const steps = back.timeline.filter((e) => e.generation === 2).map((e) => `${e.step}:${e.outcome}`);
      expect(steps.filter((s) => s.startsWith('download'))).toEqual(['download:Succeeded']);
      const shown = expectOk(await runFerry(['rollout', 'status', ...ref(name)]), 'rollout status');
      expect(shown.stdout).toContain('step 2 gate evaluation: Failed: score 0.41 below 0.9');
      // After the rollback, r1 alone answers.
      const r2 = client.byRevision.r2 ?? 0;
      const r1 = client.byRevision.r1 ?? 0;
      await waitFor('r1 answering alone', 60_000, async () => (client!.byRevision.r1 ?? 0) > r1 + 10);
      expect(client.byRevision.r2 ?? 0).toBe(r2);
      expect(r2).toBeGreaterThan(0);
    } finally {
      await client?.stop();
      team.shutdown();
      await teamRunning;
      await connection.close();
    }
    console.info("a steady client through a canary the team's evaluation failed, Ferry's worker killed at each step", {
      killedAt: killed,
      answeredBy: client.byRevision,
      failed: client.failures.length,
    });
    expect(killed).toHaveLength(4);
    expect(client.failures).toEqual([]);
    // The candidate's objects are gone: slot b holds nothing.
    await waitFor('slot b empty', 60_000, async () =>
      (await modelObjects(kube, kube.ns, name)).every((o) => !o.includes(`${name}-b`)),
    );
    expectOk(await runFerry(['delete', ...ref(name), '--wait']), 'delete');
  });
});
