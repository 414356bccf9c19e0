// fetchAdapters: puts the LoRA adapters the spec lists on the model's volume, and removes those it no longer lists,
// with one adapter Job (builders/adapter-job.ts), while the engine serves. The volume records what it holds
// (annotation ferry.dev/adapters, field manager ferry-adapters): when that is already the desired set, no Job runs.
import type { V1Job, V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import {
  FAILURE,
  failure,
  type AdapterFilesResult,
  type ObjectsInput,
  type ServedModel,
} from '../../workflows/contract/index.js';
import { adapterJobName, buildAdapterJob, FIELD_MANAGER, pvcName, slotBase, sourceHash8 } from '../builders/index.js';
import { ProgressReporter } from '../cluster/progress.js';
import { waitFor } from '../cluster/wait.js';
import { timingOf, type ActivityDeps } from '../deps.js';
import { adapterFetches, type AdapterFetch } from '../readers/adapter-job.js';
import { assertOurs } from '../readers/ownership.js';
import { classifyPod } from '../readers/pod-problems.js';
import { jobEnd } from '../readers/puller-status.js';
import { jobPodSelector, jobRef } from './puller.js';

/** On the PVC: the adapter directories the volume completely holds, as space-separated 8-hex source hashes. */
const ANNOTATION_ADAPTERS = 'ferry.dev/adapters';
const ADAPTERS_FIELD_MANAGER = 'ferry-adapters';
/** The puller's reasons that no retry fixes: the spec must change. */
const FINAL_REASONS = new Set(['SourceNotFound', 'AccessDenied', 'SourceForbidden', 'WeightsCorrupt', 'NoSpace']);
const DEADLINE_GRACE_MS = 60_000;

export async function fetchAdapters(deps: ActivityDeps, input: ObjectsInput): Promise<AdapterFilesResult> {
  const { model, slot } = input;
  const { cluster } = deps;
  const base = slotBase(model.metadata.name, slot);
  const adapters = model.spec.engine.lora.adapters ?? [];
  const pvcRef = {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    name: pvcName(base),
    namespace: model.metadata.namespace,
  };
  const pvc = assertOurs(model, await cluster.get<V1PersistentVolumeClaim>(pvcRef));
  if (!pvc) throw failure(FAILURE.VolumeBeingDeleted, `the volume ${pvcRef.namespace}/${pvcRef.name} is gone`);
  // An adapter copied from a claim that does not exist would keep the Job's pod Pending until its deadline: it is
  // refused now, by name, and the others are fetched.
  const missingClaims = new Set<string>();
  for (const claim of new Set(adapters.flatMap((a) => (a.source.pvc ? [a.source.pvc.claimName] : [])))) {
    if (!(await cluster.get({ ...pvcRef, name: claim }))) missingClaims.add(claim);
  }
  const refused = adapters.filter((a) => a.source.pvc && missingClaims.has(a.source.pvc.claimName));
  const fetchable = adapters.filter((a) => !refused.includes(a));
  const refusals = refused.map((a) => ({
    name: a.name,
    reason: 'SourceNotFound',
    message: `the PersistentVolumeClaim ${a.source.pvc!.claimName} does not exist in namespace ${model.metadata.namespace}`,
    permanent: true,
  }));
  const wanted = fetchable.map((a) => sourceHash8(a.source));
  const held = new Set((pvc.metadata?.annotations?.[ANNOTATION_ADAPTERS] ?? '').split(' ').filter(Boolean));
  if (held.size === wanted.length && wanted.every((h) => held.has(h))) {
    return { fetched: fetchable.map((a) => a.name), failed: refusals };
  }

  const forJob: ServedModel = {
    ...model,
    spec: { ...model.spec, engine: { ...model.spec.engine, lora: { ...model.spec.engine.lora, adapters: fetchable } } },
  };
  const jobName = adapterJobName(base, fetchable);
  const ref = jobRef(model, jobName);
  // A Job of this name is this very set's: one left by an attempt that was cut short is awaited, not made again.
  const existing = assertOurs(model, await cluster.get<V1Job>(ref));
  const options = { rootUid: input.rootUid, ...(slot ? { slot } : {}) };
  const started = existing ?? (await cluster.apply(buildAdapterJob(forJob, options), FIELD_MANAGER));
  const fetches = await awaitAdapterJob(deps, forJob, jobName, started);

  await cluster.delete(ref, 'Background', { uid: started.metadata?.uid });
  const fetched = fetchable.filter((_, i) => fetches[i]!.state === 'Fetched');
  await cluster.apply(
    {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: {
        name: pvcRef.name,
        namespace: pvcRef.namespace,
        annotations: { [ANNOTATION_ADAPTERS]: fetched.map((a) => sourceHash8(a.source)).join(' ') },
      },
    },
    ADAPTERS_FIELD_MANAGER,
  );
  return {
    jobName,
    fetched: fetched.map((a) => a.name),
    failed: [
      ...fetches
        .filter((f) => f.state !== 'Fetched')
        .map((f) => ({
          name: f.name,
          reason: f.reason ?? 'DownloadFailed',
          message: f.message ?? '',
          permanent: FINAL_REASONS.has(f.reason ?? ''),
        })),
      ...refusals,
    ],
  };
}

/** Waits until the Job's pod has ended (or the Job did: its deadline), reporting its state; each adapter's outcome. */
async function awaitAdapterJob(
  deps: ActivityDeps,
  model: ServedModel,
  jobName: string,
  job: V1Job,
): Promise<AdapterFetch[]> {
  const { cluster } = deps;
  const timing = timingOf(deps);
  const namespace = model.metadata.namespace;
  const adapters = model.spec.engine.lora.adapters ?? [];
  const reporter = new ProgressReporter(deps.progress, timing.progressIntervalMs);
  const deadline = Date.now() + (job.spec?.activeDeadlineSeconds ?? 3_600) * 1_000 + DEADLINE_GRACE_MS;
  const done = await waitFor<AdapterFetch[]>(cluster, {
    signal: Context.current().cancellationSignal,
    pollMs: timing.pollMs,
    deadline,
    watches: [
      { path: `/apis/batch/v1/namespaces/${namespace}/jobs`, query: { fieldSelector: `metadata.name=${jobName}` } },
      { path: `/api/v1/namespaces/${namespace}/pods`, query: { labelSelector: jobPodSelector(jobName) } },
    ],
    check: async () => {
      const [now, pods] = await Promise.all([
        cluster.get<V1Job>(jobRef(model, jobName)),
        cluster.list<V1Pod>('v1', 'Pod', namespace, { labelSelector: jobPodSelector(jobName) }),
      ]);
      if (!now || now.metadata?.uid !== job.metadata?.uid) {
        throw failure(FAILURE.ObjectsTerminating, `the adapter Job ${namespace}/${jobName} was deleted while it ran`);
      }
      const pod = pods.find((p) => !p.metadata?.deletionTimestamp) ?? pods[0];
      const phase = pod?.status?.phase;
      if (phase === 'Succeeded' || phase === 'Failed' || jobEnd(now)) {
        const fetches = adapterFetches(pod, adapters);
        // The Job ended (its deadline) with containers still running: those failed in this Job.
        return fetches.map((f) =>
          f.state === 'Running'
            ? {
                name: f.name,
                state: 'Failed' as const,
                reason: 'DeadlineExceeded',
                message: `the adapter Job ${jobName} ran out of time (spec.puller.deadline)`,
              }
            : f,
        );
      }
      const problem = pod ? classifyPod(pod) : undefined;
      const running = adapterFetches(pod, adapters).filter((f) => f.state === 'Running').length;
      await reporter.report({
        step: 'adapters',
        state: problem?.reason ?? phase ?? 'Pending',
        message: problem?.message ?? `${adapters.length - running} of ${adapters.length} adapters fetched`,
      });
      return undefined;
    },
  });
  if (!done) {
    throw failure(FAILURE.DeadlineExceeded, `the adapter Job ${namespace}/${jobName} did not end within its deadline`);
  }
  return done;
}
