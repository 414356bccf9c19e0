// What a puller Job and its pods say, in Ferry's words: how the Job ended, what the download is doing now, and the
// one-line failures a person can act on. Pure.
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { type ApplicationFailure } from '@temporalio/common';
import { PULLER_CONTAINER, summarizePullerLog } from '../builders/index.js';
import type { PodProblem } from './pod-problems.js';
import { timeOf } from './time.js';
import { FAILURE, failure, formatBytes, type FailureType, type StepProgress } from '../../workflows/contract/index.js';

export type JobEnd = { kind: 'complete' } | { kind: 'failed'; reason: string; message: string };

/** How the Job ended, from its conditions. `FailureTarget` counts: the controller has decided; pods are stopping. */
export function jobEnd(job: V1Job): JobEnd | undefined {
  const conditions = job.status?.conditions ?? [];
  const holds = (type: string) => conditions.find((c) => c.type === type && c.status === 'True');
  if (holds('Complete')) return { kind: 'complete' };
  const failed = holds('Failed') ?? holds('FailureTarget');
  return failed ? { kind: 'failed', reason: failed.reason ?? 'Failed', message: failed.message ?? '' } : undefined;
}

/** Timestamps arrive as Date from typed reads and as strings from watches. */
/** From the Job's start to its completion (or now). */
export function jobDurationMs(job: V1Job, now = Date.now()): number {
  const start = timeOf(job.status?.startTime);
  if (!start) return 0;
  return Math.max(0, (timeOf(job.status?.completionTime) || now) - start);
}

const newestFirst = (pods: Iterable<V1Pod>): V1Pod[] =>
  [...pods].sort((a, b) => timeOf(b.metadata?.creationTimestamp) - timeOf(a.metadata?.creationTimestamp));

/** The pod that tells what the Job does now: the newest one not being deleted, else the newest. */
export function currentPod(pods: Iterable<V1Pod>): V1Pod | undefined {
  const sorted = newestFirst(pods);
  return sorted.find((p) => !p.metadata?.deletionTimestamp) ?? sorted[0];
}

export function lastFailedPod(pods: Iterable<V1Pod>): V1Pod | undefined {
  return newestFirst(pods).find((p) => p.status?.phase === 'Failed');
}

/** The puller container's exit code, once it has terminated. */
function exitCodeOf(pod: V1Pod): number | undefined {
  const statuses = pod.status?.containerStatuses ?? [];
  const s = statuses.find((c) => c.name === PULLER_CONTAINER) ?? statuses[0];
  return s?.state?.terminated?.exitCode ?? s?.lastState?.terminated?.exitCode;
}

/** The container has run (or runs), so its log may be readable. */
export const hasStarted = (pod: V1Pod): boolean => ['Running', 'Succeeded', 'Failed'].includes(pod.status?.phase ?? '');

/** What the download is doing, for heartbeats and the workflow's status. */
export function pullerProgress(
  job: V1Job,
  pod: V1Pod | undefined,
  problem: PodProblem | undefined,
  log: string | undefined,
): StepProgress {
  const summary = log ? summarizePullerLog(log) : {};
  const bytes = summary.done?.bytes ?? summary.progress?.bytes;
  const total = summary.done ? summary.done.bytes : summary.progress?.totalBytes;
  const rate = summary.done ? undefined : summary.progress?.bytesPerSecond;
  const amounts = {
    ...(bytes !== undefined ? { bytes } : {}),
    ...(total !== undefined && total !== null ? { totalBytes: total } : {}),
    ...(rate !== undefined ? { bytesPerSecond: rate } : {}),
  };
  const failed = job.status?.failed ?? 0;
  const attempts = (job.spec?.backoffLimit ?? 0) + 1;
  if (!pod) {
    return {
      step: 'download',
      state: 'Pending',
      message: failed > 0 ? `${failed} of ${attempts} attempts failed; waiting for the next pod` : 'waiting for a pod',
    };
  }
  if (problem && !problem.waiting && pod.status?.phase === 'Failed') {
    return {
      step: 'download',
      state: 'Retrying',
      message: `${problem.message}; ${failed} of ${attempts} attempts failed`,
      ...amounts,
    };
  }
  if (problem) return { step: 'download', state: problem.reason, message: problem.message, ...amounts };
  const waiting = pod.status?.containerStatuses?.find((c) => c.state?.waiting?.reason)?.state?.waiting?.reason;
  const state = pod.status?.phase === 'Pending' && waiting ? waiting : (pod.status?.phase ?? 'Pending');
  return { step: 'download', state, message: `pod ${pod.metadata?.name} is ${state}`, ...amounts };
}

function formatSeconds(s: number): string {
  if (s % 3600 === 0) return `${s / 3600}h`;
  if (s % 60 === 0) return `${s / 60}m`;
  return `${s}s`;
}

/** `Running, 1.2 GiB of 14.0 GiB` or `Unschedulable: pod … waits for a node: …`. */
export function describeProgress(p: StepProgress | undefined): string {
  if (!p) return 'no pod had started';
  const amount =
    p.bytes !== undefined
      ? `, ${formatBytes(p.bytes)}${p.totalBytes !== undefined ? ` of ${formatBytes(p.totalBytes)}` : ''} downloaded`
      : '';
  const detail = p.state === 'Running' || p.state === 'Pending' || !p.message ? '' : `: ${p.message}`;
  return `${p.state}${detail}${amount}`;
}

const times = (n: number): string => (n === 1 ? 'once' : `${n} times`);

function lastLines(text: string, lines: number, maxChars: number): string {
  const tail = text
    .split('\n')
    .filter((l) => l.trim())
    .slice(-lines)
    .join('\n');
  return tail.length > maxChars ? `…${tail.slice(-maxChars)}` : tail;
}

/** `DeadlineExceeded`: the Job controller ended the download at `activeDeadlineSeconds`. */
export function deadlineFailure(job: V1Job, last: StepProgress | undefined, note = ''): ApplicationFailure {
  const deadline = job.spec?.activeDeadlineSeconds;
  return failure(
    FAILURE.DeadlineExceeded,
    `download did not finish within ${deadline !== undefined ? formatSeconds(deadline) : 'its deadline'} ` +
      `(puller.deadline); last state: ${describeProgress(last)}${note}`,
    { jobName: job.metadata?.name, lastProgress: last ?? null },
  );
}

/** `BackoffLimitExceeded`: every allowed attempt failed; says how the last one ended and what it printed. */
/** The puller's reasons that are failures of their own (the catalogue's), rather than a BackoffLimitExceeded. */
const PULLER_REASONS = new Set<string>([
  FAILURE.SourceNotFound,
  FAILURE.AccessDenied,
  FAILURE.SourceForbidden,
  FAILURE.SourceUnreachable,
  FAILURE.WeightsCorrupt,
  FAILURE.NoSpace,
  FAILURE.PullerImageInvalid,
]);

export function backoffFailure(
  job: V1Job,
  end: JobEnd & { kind: 'failed' },
  pod: V1Pod | undefined,
  log: string | undefined,
): ApplicationFailure {
  const exitCode = pod ? exitCodeOf(pod) : undefined;
  const error = log ? summarizePullerLog(log).error : undefined;
  const terminated = pod?.status?.containerStatuses?.[0]?.state?.terminated;
  const logTail = log ? lastLines(log, 20, 2_000) : 'log unavailable';
  const limit = job.spec?.backoffLimit ?? 0;
  const how =
    end.reason === 'BackoffLimitExceeded'
      ? `the puller failed ${times(job.status?.failed ?? limit + 1)} (puller.backoffLimit ${limit} allows ${limit + 1})`
      : `the puller Job failed (${end.reason}${end.message ? `: ${end.message}` : ''})`;
  const last = pod
    ? `; last pod ${pod.metadata?.name} exited with code ${exitCode ?? 'unknown'}` +
      (terminated?.reason && terminated.reason !== 'Error' ? ` (${terminated.reason})` : '')
    : '';
  const reason = error ? `; ${error.reason}: ${error.message}` : '';
  // What the puller itself named (a repository that does not exist, a gated one, a full volume) is the failure: a
  // person acts on that, not on the retries it took.
  const named = error && PULLER_REASONS.has(error.reason) ? (error.reason as FailureType) : undefined;
  return failure(
    named ?? FAILURE.BackoffLimitExceeded,
    named
      ? `${error!.message}; ${how}${last}`
      : `${how}${last}${reason}; log tail: ${log ? lastLines(log, 5, 600) : 'log unavailable'}`,
    {
      jobName: job.metadata?.name,
      pod: pod?.metadata?.name ?? null,
      exitCode: exitCode ?? null,
      errorReason: error?.reason ?? null,
      logTail,
    },
  );
}

/** `ImagePullBackOff`: the puller image cannot be pulled; the Job is kept so its pod's events can be read. */
export function imagePullFailure(jobName: string, problem: PodProblem): ApplicationFailure {
  return failure(
    FAILURE.ImagePullBackOff,
    `${problem.message} (Job ${jobName} is kept for inspection; fix puller.image or its pull secret)`,
    { jobName, pod: problem.pod },
  );
}
