// The puller Job: started once per source, then watched until the Job controller says how it ended.
import type { CoreV1Event, V1Job, V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import { Context } from '@temporalio/activity';
import {
  FAILURE,
  failure,
  type ModelInput,
  type ObjectsInput,
  parseDuration,
  type PullerResult,
  type ServedModel,
  type Slot,
  type StepProgress,
} from '../../workflows/contract/index.js';
import { refOf, type Cluster, type ObjectRef } from '../cluster/api.js';
import { timingOf, type ActivityDeps } from '../deps.js';
import {
  ANNOTATION_SPEC_HASH,
  buildPullerJob,
  canonicalJson,
  FIELD_MANAGER,
  buildCachePullerJob,
  holdsWeightsFor,
  onSharedCache,
  PULLER_CONTAINER,
  sha256Hex,
  summarizePullerLog,
  weightsClaim,
} from '../builders/index.js';
import { cacheClaimRef } from '../cluster/cache.js';
import { assertOurs, isTerminating } from '../readers/ownership.js';
import { classifyPod, type PodProblem } from '../readers/pod-problems.js';
import { ProgressReporter } from '../cluster/progress.js';
import {
  backoffFailure,
  currentPod,
  deadlineFailure,
  hasStarted,
  imagePullFailure,
  jobDurationMs,
  jobEnd,
  lastFailedPod,
  pullerProgress,
  type JobEnd,
} from '../readers/puller-status.js';
import { timeOf } from '../readers/time.js';
import { volumeProblem } from '../cluster/model-reads.js';
import { waitFor } from '../cluster/wait.js';

/** Consecutive looks (one per `pollMs`) at a pod in ImagePullBackOff before the download fails: a blip may recover. */
const IMAGE_PULL_OBSERVATIONS = 2;
/** How long after the Job's deadline awaitPuller gives the Job controller to mark it failed before failing itself. */
const DEADLINE_GRACE_MS = 120_000;
const LOG_TAIL_LINES = 50;

export const jobRef = (model: ServedModel, jobName: string): ObjectRef => ({
  apiVersion: 'batch/v1',
  kind: 'Job',
  name: jobName,
  namespace: model.metadata.namespace,
});

/** Pods of one Job: the Job controller labels them with its name (and uid); ours also carry the model's labels. */
export const jobPodSelector = (jobName: string): string => `job-name=${jobName}`;

/** The puller Job as built, stamped with a hash of its spec: a Job's pod template is immutable, so a changed spec means
 * a new Job, and the stamp tells without comparing server-defaulted fields. */
export function desiredPullerJob(model: ServedModel, rootUid: string, slot?: Slot): V1Job {
  const job = buildPullerJob(model, { rootUid, ...(slot ? { slot } : {}) });
  job.metadata!.annotations = {
    ...job.metadata!.annotations,
    [ANNOTATION_SPEC_HASH]: sha256Hex(canonicalJson(job.spec)),
  };
  return job;
}

const specHashOf = (job: V1Job): string | undefined => job.metadata?.annotations?.[ANNOTATION_SPEC_HASH];

/**
 * Creates the puller Job unless it is there. An existing Job of the same spec is left as it is, running, complete or
 * failed (awaitPuller reports which; a failed one is kept for its logs). One with another spec (a new puller image,
 * deadline, …) is deleted with its pods and created again, unless it is complete: its weights are on the volume.
 */
export async function startPuller(
  deps: ActivityDeps,
  { model, rootUid, slot }: ObjectsInput,
): Promise<{ jobName: string }> {
  const { cluster } = deps;
  const timing = timingOf(deps);
  if (onSharedCache(model)) return startCachePuller(deps, model);
  const desired = desiredPullerJob(model, rootUid, slot);
  const ref = refOf(desired);
  const existing = assertOurs(model, await cluster.get<V1Job>(ref));
  if (existing && !isTerminating(existing)) {
    if (specHashOf(existing) === specHashOf(desired) || jobEnd(existing)?.kind === 'complete') {
      return { jobName: ref.name };
    }
    // Foreground: the Job disappears only after its pods, so the new pod does not race the old one for the volume.
    await cluster.delete(ref, 'Foreground', { uid: existing.metadata?.uid });
  }
  if (existing) {
    const reporter = new ProgressReporter(deps.progress, timing.progressIntervalMs);
    const gone = await waitFor(cluster, {
      signal: Context.current().cancellationSignal,
      pollMs: timing.pollMs,
      deadline: Date.now() + timing.deletionWaitMs,
      watches: [{ path: jobsPath(ref.namespace!), query: { fieldSelector: `metadata.name=${ref.name}` } }],
      check: async (trigger) => {
        if (!(await cluster.get(ref))) return true;
        if (trigger !== 'change') {
          await reporter.report({
            step: 'download',
            state: 'Pending',
            message: `waiting for the previous Job ${ref.name} to go`,
          });
        }
        return undefined;
      },
    });
    if (!gone) {
      throw failure(
        FAILURE.ObjectsTerminating,
        `the previous puller Job ${ref.namespace}/${ref.name} is still being deleted`,
      );
    }
  }
  await cluster.apply(desired, FIELD_MANAGER);
  return { jobName: ref.name };
}

/**
 * The cache's one puller Job (docs/design/cache.md, section 4): created unless it is there or the volume already holds
 * the weights, owned by the cache's volume. One that is there is the pull, whichever model started it and with
 * whatever settings: every model of the cache awaits it. One being deleted is waited out by the retry.
 */
async function startCachePuller(deps: ActivityDeps, model: ServedModel): Promise<{ jobName: string }> {
  const { cluster } = deps;
  const pvc = assertOurs(model, await cluster.get<V1PersistentVolumeClaim>(cacheClaimRef(model)));
  if (!pvc || isTerminating(pvc)) {
    throw failure(
      FAILURE.VolumeBeingDeleted,
      `cache volume ${model.metadata.namespace}/${weightsClaim(model)} is gone or being deleted; it is joined again`,
    );
  }
  const desired = buildCachePullerJob(model, pvc.metadata!.uid!);
  const ref = refOf(desired);
  // Pulled since this model joined: its Job released (gone or going), and awaitPuller finds the weights recorded.
  if (holdsWeightsFor(pvc, model)) return { jobName: ref.name };
  const existing = assertOurs(model, await cluster.get<V1Job>(ref));
  if (existing && isTerminating(existing)) {
    throw failure(FAILURE.ObjectsTerminating, `the cache's puller Job ${ref.namespace}/${ref.name} is being deleted`);
  }
  if (!existing) {
    // Created, never applied: a model with other puller settings must not rewrite the Job another model started.
    await cluster.create(desired).catch((err: unknown) => {
      if ((err as { type?: string }).type !== 'KubernetesHttp409') throw err;
    });
  }
  return { jobName: ref.name };
}

const jobsPath = (namespace: string) => `/apis/batch/v1/namespaces/${namespace}/jobs`;
const podsPath = (namespace: string) => `/api/v1/namespaces/${namespace}/pods`;

type Outcome = JobEnd | { kind: 'deleted' } | { kind: 'image'; problem: PodProblem };

/**
 * Watches the puller Job and its pods until the Job controller ends it, heartbeating progress (pod phase or waiting
 * reason, bytes from the puller's log when the kubelet serves it) every `pollMs`. The deadline is the Job's own
 * `activeDeadlineSeconds`. Unschedulable is a waiting state, not a failure: a GPU node may yet appear. A pod that
 * cannot pull its image fails the step after `IMAGE_PULL_OBSERVATIONS` looks; the Job is kept for inspection (its
 * pod keeps the image error and events) and ends by its deadline or with the model. On cancellation the Job is left
 * running: the workflow releases it with `releaseVolume({ abandon: true })`.
 */
export async function awaitPuller(
  deps: ActivityDeps,
  { model, jobName, slot }: ModelInput & { jobName: string },
): Promise<PullerResult> {
  const { cluster } = deps;
  const timing = timingOf(deps);
  const namespace = model.metadata.namespace;
  const ref = jobRef(model, jobName);
  const reporter = new ProgressReporter(deps.progress, timing.progressIntervalMs);

  const initial = assertOurs(model, await cluster.get<V1Job>(ref));
  if (!initial) return missingJob(cluster, model, jobName, slot);
  const initialEnd = jobEnd(initial);
  if (initialEnd?.kind === 'complete') return { jobName, durationMs: jobDurationMs(initial) };

  const state = {
    job: initial,
    pods: [] as V1Pod[],
    imagePod: undefined as string | undefined,
    imageLooks: 0,
    // A retry starts from the last progress its previous attempt heartbeated.
    last: lastHeartbeat(),
  };
  const listPods = () => cluster.list<V1Pod>('v1', 'Pod', namespace, { labelSelector: jobPodSelector(jobName) });
  state.pods = await listPods();

  const look = async (): Promise<Outcome | undefined> => {
    const pod = currentPod(state.pods);
    const events = pod && pod.status?.phase === 'Pending' ? await podEvents(cluster, namespace, pod) : [];
    let problem = pod ? classifyPod(pod, events) : undefined;
    if (pod && !problem && !pod.spec?.nodeName && pod.status?.phase === 'Pending') {
      // Not scheduled and no word from the scheduler: it may be waiting for the volume to be provisioned.
      problem = await volumeProblem(cluster, namespace, weightsClaim(model, slot));
    }
    if (problem?.reason === FAILURE.ImagePullBackOff) {
      state.imageLooks = state.imagePod === problem.pod ? state.imageLooks + 1 : 1;
      state.imagePod = problem.pod;
      if (state.imageLooks >= IMAGE_PULL_OBSERVATIONS) return { kind: 'image', problem };
    } else {
      state.imageLooks = 0;
    }
    const log =
      pod && hasStarted(pod)
        ? await cluster.podLogTail(namespace, pod.metadata!.name!, PULLER_CONTAINER, { tailLines: LOG_TAIL_LINES })
        : undefined;
    state.last = pullerProgress(state.job, pod, problem, log);
    await reporter.report(state.last);
    return undefined;
  };

  const outcome =
    initialEnd ??
    (await waitFor<Outcome>(cluster, {
      signal: Context.current().cancellationSignal,
      pollMs: timing.pollMs,
      deadline: deadlineAt(state.job, model) + DEADLINE_GRACE_MS,
      watches: [
        { path: jobsPath(namespace), query: { fieldSelector: `metadata.name=${jobName}` } },
        { path: podsPath(namespace), query: { labelSelector: jobPodSelector(jobName) } },
      ],
      check: async (trigger) => {
        const job = await cluster.get<V1Job>(ref);
        if (!job || job.metadata?.uid !== state.job.metadata?.uid) return { kind: 'deleted' };
        state.job = job;
        const end = jobEnd(job);
        if (end) return end;
        if (trigger === 'change') return undefined;
        state.pods = await listPods();
        return look();
      },
    }));

  if (!outcome) {
    // Past the deadline and its grace, and the Job controller has not ended the Job: end the wait anyway.
    const job = (await cluster.get<V1Job>(ref)) ?? state.job;
    const end = jobEnd(job);
    if (!end) {
      throw deadlineFailure(job, state.last, '; the Job controller has not marked the Job failed (is it running?)');
    }
    return finish(cluster, model, job, end, state.last);
  }
  // A cache's Job goes only with its volume; another model's release may have recorded the weights just before.
  if (outcome.kind === 'deleted' && onSharedCache(model)) return missingJob(cluster, model, jobName, slot);
  if (outcome.kind === 'deleted') {
    throw failure(
      FAILURE.KubernetesRejected,
      `puller Job ${namespace}/${jobName} was deleted before it finished; start the download again`,
    );
  }
  if (outcome.kind === 'image') throw imagePullFailure(jobName, outcome.problem);
  return finish(cluster, model, state.job, outcome, state.last);
}

async function finish(
  cluster: Cluster,
  model: ServedModel,
  job: V1Job,
  end: JobEnd,
  last: StepProgress | undefined,
): Promise<PullerResult> {
  const jobName = job.metadata!.name!;
  if (end.kind === 'complete') {
    // What the puller wrote, from its last line: a download shorter than its progress interval reported none.
    const pods = await cluster.list<V1Pod>('v1', 'Pod', model.metadata.namespace, {
      labelSelector: jobPodSelector(jobName),
    });
    const pod = pods.find((p) => p.status?.phase === 'Succeeded');
    const log = pod
      ? await cluster.podLogTail(model.metadata.namespace, pod.metadata!.name!, PULLER_CONTAINER, { tailLines: 5 })
      : undefined;
    const done = log ? summarizePullerLog(log).done : undefined;
    return { jobName, durationMs: jobDurationMs(job), ...(done ? { bytes: done.bytes } : {}) };
  }
  if (end.reason === 'DeadlineExceeded') throw deadlineFailure(job, last);
  const pods = await cluster.list<V1Pod>('v1', 'Pod', model.metadata.namespace, {
    labelSelector: jobPodSelector(jobName),
  });
  const pod = lastFailedPod(pods);
  const log = pod
    ? await cluster.podLogTail(model.metadata.namespace, pod.metadata!.name!, PULLER_CONTAINER, {
        tailLines: LOG_TAIL_LINES,
      })
    : undefined;
  throw backoffFailure(job, end, pod, log);
}

/** A missing Job whose volume records the source's weights was released after success: resume, don't re-pull. */
async function missingJob(cluster: Cluster, model: ServedModel, jobName: string, slot?: Slot): Promise<PullerResult> {
  const pvc = await cluster.get<V1PersistentVolumeClaim>({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    name: weightsClaim(model, slot),
    namespace: model.metadata.namespace,
  });
  if (pvc && holdsWeightsFor(pvc, model)) return { jobName, durationMs: 0 };
  throw failure(
    FAILURE.KubernetesRejected,
    `puller Job ${model.metadata.namespace}/${jobName} does not exist and the volume does not hold the weights; ` +
      'start the download again',
  );
}

function lastHeartbeat(): StepProgress | undefined {
  const details = Context.current().info.heartbeatDetails as StepProgress | undefined;
  return details?.step === 'download' ? details : undefined;
}

/** When the Job controller will fail the Job: its start plus `activeDeadlineSeconds`. */
function deadlineAt(job: V1Job, model: ServedModel): number {
  const seconds = job.spec?.activeDeadlineSeconds;
  const ms = seconds !== undefined ? seconds * 1000 : parseDuration(model.spec.puller.deadline);
  return (timeOf(job.status?.startTime) || Date.now()) + ms;
}

/** Events of a pod (mount failures, Multi-Attach live only there); best effort. */
async function podEvents(cluster: Cluster, namespace: string, pod: V1Pod): Promise<CoreV1Event[]> {
  return cluster
    .list<CoreV1Event>('v1', 'Event', namespace, {
      fieldSelector: `involvedObject.kind=Pod,involvedObject.name=${pod.metadata?.name}`,
    })
    .catch(() => []);
}
