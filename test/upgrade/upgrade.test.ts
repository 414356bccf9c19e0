// Upgrading the worker under live models (docs/upgrading.md): the previous release's worker serves three models — one
// Ready, one Degraded, one in the middle of its download — then stops, and this checkout's worker takes them over.
// It must replay every history (no workflow task failure, no nondeterminism), leave the engine pods alone, finish the
// download, and then update and repair the models; unversioned, the previous release then takes them back (a
// downgrade) and deletes them. Run twice: the new worker unversioned (the default), and
// with Worker Versioning on (the move from an unversioned worker to a Worker Deployment). Real: the previous
// release's code from git, both worker processes, Temporal, the control plane; simulated: KWOK pods, the engine
// stand-in and the download (docs: what is simulated).
import { Client, Connection } from '@temporalio/client';
import { afterAll, describe, expect, it } from 'vitest';
import type { ModelStatus } from '../../workflows/contract/index.js';
import {
  expectOk,
  ferryJson,
  startWorkerProcess,
  terminateModelsOf,
  uniqueCluster,
  type WorkerProcess,
} from '../support/e2e.js';
import { runFerry, runWorkerCommand, writeDoc } from '../support/ferry-worker.js';
import { RESTRICTED, useNamespace } from '../support/fixtures.js';
import { waitFor } from '../support/kube.js';
import { readLocalEnv } from '../support/local-env.js';
import type { Doc } from '../support/workflow-harness.js';
import { PREVIOUS, previousReleaseWorker } from './previous-release.js';

const kube = useNamespace('e2e-upgrade', RESTRICTED);
const workers: WorkerProcess[] = [];
afterAll(async () => {
  for (const w of workers) await terminateModelsOf(w.cluster).catch(() => undefined);
  for (const w of workers) await w.stop();
});

type Kind = 'ready' | 'degraded' | 'downloading';

function modelDoc(cluster: string, name: string, kind: Kind): Doc {
  const doc: Doc = {
    apiVersion: 'ferry.dev/v1alpha1',
    kind: 'ServedModel',
    metadata: {
      name,
      namespace: kube.ns,
      labels: {
        'sim.ferry.dev/load-delay-seconds': '0',
        // The download of the third model outlasts the upgrade.
        'sim.ferry.dev/complete-delay': kind === 'downloading' ? '45s' : '1s',
      },
    },
    spec: {
      cluster,
      source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
      resources: { gpus: 0 },
      engine: { startupTimeout: '3m' },
      puller: { deadline: '10m' },
    },
  };
  if (kind === 'degraded') {
    // An adapter whose volume does not exist: Degraded (AdapterFailed), the base model serving, until an update.
    doc.spec.engine.lora = {
      enabled: true,
      adapters: [{ name: 'ckpt', source: { pvc: { claimName: 'no-such-claim' } } }],
    };
  }
  return doc;
}

async function engineUids(name: string): Promise<string[]> {
  const pods = await kube.core.listNamespacedPod({
    namespace: kube.ns,
    labelSelector: `ferry.dev/model=${name},app.kubernetes.io/component=engine`,
  });
  return pods.items.map((p) => p.metadata!.uid!).sort();
}

/** Every event type of every run of the model's workflow that a failed workflow task leaves: none expected. */
async function failedTasks(client: Client, cluster: string, name: string): Promise<string[]> {
  const found: string[] = [];
  const query = `FerryCluster = "${cluster}" AND FerryModel = "${name}"`;
  for await (const run of client.workflow.list({ query })) {
    const history = await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
    for (const event of history.events ?? []) {
      const failed = event.workflowTaskFailedEventAttributes;
      if (failed) found.push(`${run.runId}: ${failed.cause} ${failed.failure?.message ?? ''}`);
    }
  }
  return found;
}

describe(`upgrading the worker from ${PREVIOUS.tag}`, { timeout: 900_000 }, () => {
  it.each(['off', 'on'] as const)(
    'takes over Ready, Degraded and downloading models (versioning %s)',
    async (versioning) => {
      const cluster = uniqueCluster(`up${versioning}`);
      const status = (name: string) => ferryJson<ModelStatus>(['status', name, '-n', kube.ns, '--cluster', cluster]);
      const phaseIs = (name: string, ...phases: ModelStatus['phase'][]) =>
        waitFor(`${name} ${phases.join(' or ')}`, 240_000, async () => {
          const s = await status(name).catch(() => undefined);
          return s && phases.includes(s.phase) ? s : undefined;
        });

      const previous = await startWorkerProcess(cluster, undefined, {}, previousReleaseWorker());
      workers.push(previous);
      const docs = {
        ready: modelDoc(cluster, 'ready', 'ready'),
        degraded: modelDoc(cluster, 'degraded', 'degraded'),
        downloading: modelDoc(cluster, 'downloading', 'downloading'),
      };
      for (const doc of Object.values(docs)) expectOk(await runFerry(['apply', '-f', writeDoc(doc)]), 'ferry apply');
      await phaseIs('ready', 'Ready');
      const degraded = await phaseIs('degraded', 'Degraded');
      expect(degraded.lastError?.reason).toBe('AdapterFailed');
      await phaseIs('downloading', 'Downloading');
      const pods = { ready: await engineUids('ready'), degraded: await engineUids('degraded') };
      expect(pods.ready).toHaveLength(1);

      // The replay gate, before the upgrade: this checkout's code replays the previous release's open runs.
      const gate = await runWorkerCommand(['--cluster', cluster, '--replay-check-open']);
      expect(gate.stdout).toMatch(/^3 replayed, 0 failed$/m);
      expect(gate.code).toBe(0);

      // The upgrade: the previous worker drains and exits; this checkout's starts.
      expect(await previous.stop()).toBe(0);
      const current = await startWorkerProcess(cluster, undefined, { FERRY_WORKER_VERSIONING: versioning });
      workers.push(current);

      // Each model's history replays on the new code (a status query replays an uncached run), and the download that
      // was under way finishes there.
      expect((await status('ready')).phase).toBe('Ready');
      expect((await status('degraded')).phase).toBe('Degraded');
      const downloaded = await phaseIs('downloading', 'Ready');
      expect(downloaded.timeline.filter((t) => t.step === 'download').map((t) => t.outcome)).toEqual(['Succeeded']);

      // A repair on the new worker: the Service deleted, the watch wakes the model, a look puts it back.
      await kube.core.deleteNamespacedService({ name: 'ready', namespace: kube.ns });
      await waitFor('the Service back', 120_000, async () =>
        kube.core.readNamespacedService({ name: 'ready', namespace: kube.ns }).catch(() => undefined),
      );
      // The upgrade itself replaced no engine pod (the Degraded model was looked at meanwhile, on its backoff).
      expect(await engineUids('ready')).toEqual(pods.ready);
      expect(await engineUids('degraded')).toEqual(pods.degraded);

      // Updates on the new worker: an engine flag (a deliberate rollout), and the bad adapter dropped.
      docs.ready.spec.engine.args = ['--max-model-len=2048'];
      delete docs.degraded.spec.engine.lora;
      for (const name of ['ready', 'degraded'] as const) {
        expectOk(
          await runFerry(['apply', '-f', writeDoc(docs[name]), '--wait', '--timeout', '4m']),
          `ferry apply ${name}`,
        );
        expect(await status(name)).toMatchObject({ phase: 'Ready', observedGeneration: 2 });
      }

      // A downgrade, unversioned: the previous release's worker takes the models back, replays what this checkout's
      // wrote, and tears them down. (With versioning, going back to a release without it is not tested.)
      let last = current;
      if (versioning === 'off') {
        expect(await current.stop()).toBe(0);
        last = await startWorkerProcess(cluster, undefined, {}, previousReleaseWorker());
        workers.push(last);
        for (const name of ['ready', 'degraded', 'downloading']) expect((await status(name)).phase).toBe('Ready');
      }
      for (const name of ['ready', 'degraded', 'downloading']) {
        expectOk(
          await runFerry(['delete', name, '-n', kube.ns, '--cluster', cluster, '--wait']),
          `ferry delete ${name}`,
        );
      }

      // No workflow task failed, before or after the upgrade, in any run of any of the three.
      const connection = await Connection.connect({ address: readLocalEnv().TEMPORAL_ADDRESS });
      try {
        const client = new Client({ connection });
        for (const name of ['ready', 'degraded', 'downloading']) {
          expect(await failedTasks(client, cluster, name)).toEqual([]);
        }
      } finally {
        await connection.close();
      }
      expect(current.log()).not.toMatch(/[Nn]ondeterminism/);
      expect(last.log()).not.toMatch(/[Nn]ondeterminism/);
      if (versioning === 'on') expect(current.log()).toContain('made this version current');
    },
  );
});
