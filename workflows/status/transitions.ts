// How the workflow moves a model's status: phases, conditions, timeline, progress and observations.
// Pure functions from a status to the next one; the workflow holds the only mutable reference.
import {
  type Condition,
  describeSource,
  type ModelError,
  type ModelStatus,
  type ObservedStatus,
  type Phase,
  type ServedModel,
  type Step,
  type StepProgress,
  type TeardownResult,
} from '../contract/index.js';
import { clip, printable } from '../contract/spec/text.js';
import { setCondition } from './conditions.js';
import { downloadProgress } from './download.js';
import { stepRow } from '../steps/table.js';
import { closeOpenSteps, endStep, openEntry, skipStep, startStep } from './timeline.js';

/** A failure as status shows it: a named reason and one line for a person. */
export interface FailureInfo {
  reason: string;
  message: string;
}

/** Phases where the workflow waits for a message or watches, rather than working. */
export const SETTLED: readonly Phase[] = ['Ready', 'Idle', 'Degraded', 'Failed'];

/** The status of a model the workflow has just been given. */
export function initialStatus(
  spec: ServedModel,
  now: string,
  owner: { tenant?: string; requestedBy?: string } = {},
): ModelStatus {
  const { tenant } = owner;
  const requestedBy = askedBy(owner.requestedBy);
  return {
    name: spec.metadata.name,
    namespace: spec.metadata.namespace,
    cluster: spec.spec.cluster,
    ...(tenant !== undefined ? { tenant } : {}),
    phase: 'Pending',
    conditions: [],
    servedModelName: spec.spec.engine.servedModelName,
    source: describeSource(spec.spec.source),
    replicas: spec.spec.replicas,
    readyReplicas: 0,
    generation: 1,
    ...(requestedBy !== undefined ? { requestedBy } : {}),
    observedGeneration: 0,
    timeline: [],
    startedAt: now,
    updatedAt: now,
  };
}

/** Records an accepted spec as generation `generation`, asked for by `requestedBy` (as the caller said). */
export function acceptSpec(
  status: ModelStatus,
  spec: ServedModel,
  generation: number,
  now: string,
  requestedBy?: string,
): ModelStatus {
  const { requestedBy: _before, ...rest } = status;
  const by = askedBy(requestedBy);
  return {
    ...rest,
    servedModelName: spec.spec.engine.servedModelName,
    source: describeSource(spec.spec.source),
    replicas: spec.spec.replicas,
    generation,
    ...(by !== undefined ? { requestedBy: by } : {}),
    updatedAt: now,
  };
}

/** A caller's words about itself as status keeps them: printable, at most 200 bytes; nothing when empty. */
export function askedBy(text: unknown): string | undefined {
  return typeof text === 'string' && text.trim() !== '' ? clip(printable(text.trim()), 200) : undefined;
}

/** `, asked by X` for a timeline entry's detail, when the caller said who it was. */
export function byWhom(requestedBy: string | undefined): string {
  return requestedBy !== undefined ? `, asked by ${requestedBy}` : '';
}

/** The phase a step puts the model in. Engine steps of a model that has served before are an update. */
export function phaseForStep(step: Step, status: ModelStatus): Phase {
  // The current revision serves while a candidate rolls out beside it (docs/design/rollout.md): Updating throughout.
  if (rollingOut(status)) return 'Updating';
  const { phase } = stepRow(step);
  if (phase !== 'engine') return phase;
  // A model at zero woken (not updated): its replicas start again.
  if (status.phase === 'Idle' && !openEntry(status, 'update')) return 'Starting';
  return status.observedGeneration > 0 ? 'Updating' : 'Starting';
}

function withPhase(status: ModelStatus, phase: Phase, now: string): ModelStatus {
  return status.phase === phase ? status : { ...status, phase, updatedAt: now };
}

function notReady(status: ModelStatus, reason: string, message: string, generation: number, now: string): ModelStatus {
  return setCondition(status, { type: 'Ready', status: 'False', reason, message, observedGeneration: generation }, now);
}

/** Sets the condition of `step`, if it has one, for `generation`. */
function stepCondition(
  status: ModelStatus,
  step: Step,
  change: { status: Condition['status']; reason: string; message: string },
  generation: number,
  now: string,
): ModelStatus {
  const type = stepRow(step).condition?.type;
  return type ? setCondition(status, { type, ...change, observedGeneration: generation }, now) : status;
}

/** A step starts: its phase, an open timeline entry, its condition Unknown, Ready False. */
export function beginStep(
  status: ModelStatus,
  step: Step,
  generation: number,
  now: string,
  detail?: string,
): ModelStatus {
  const phase = phaseForStep(step, status);
  let next = startStep(withPhase(status, phase, now), step, generation, now, detail);
  next = { ...next, waiting: undefined };
  if (step === 'download') next = { ...next, download: { bytes: 0, state: 'Pending', updatedAt: now } };
  next = stepCondition(
    next,
    step,
    { status: 'Unknown', reason: 'InProgress', message: `${step} in progress` },
    generation,
    now,
  );
  if (step !== 'teardown' && !rollingOut(status))
    next = notReady(next, phase, `generation ${generation}: ${step} in progress`, generation, now);
  return next;
}

/** A candidate is rolling out beside the current revision, which serves meanwhile. */
const rollingOut = (status: ModelStatus): boolean => status.rollout?.state === 'Progressing';

/** A step succeeded: its entry closed, its condition True, a transient error it had is over. */
export function finishStep(
  status: ModelStatus,
  step: Step,
  generation: number,
  now: string,
  detail?: string,
): ModelStatus {
  let next = endStep(status, step, 'Succeeded', now, detail);
  next = { ...next, waiting: undefined };
  if (next.lastError?.step === step) next = { ...next, lastError: undefined };
  if (step === 'download' && next.download) {
    // The last waiting message ("pod … is ContainerCreating") is over with the download.
    const { message: _done, ...download } = next.download;
    next = { ...next, download: { ...download, state: 'Complete', updatedAt: now } };
  }
  const done = stepRow(step).condition;
  if (done) {
    next = stepCondition(
      next,
      step,
      { status: 'True', reason: done.reason, message: detail ?? done.message },
      generation,
      now,
    );
  }
  if (step === 'stop') {
    for (const type of ['RolledOut', 'Healthy'] as const) {
      next = setCondition(
        next,
        {
          type,
          status: 'False',
          reason: 'ScaledDown',
          message: 'the engine is scaled to 0 while new weights are pulled',
          observedGeneration: generation,
        },
        now,
      );
    }
    next = { ...next, readyReplicas: 0 };
  }
  return next;
}

/** The download was not needed: the volume already holds the source. */
export function skipDownload(status: ModelStatus, generation: number, now: string, detail: string): ModelStatus {
  let next = skipStep(status, 'download', generation, now, detail);
  next = { ...next, download: undefined };
  return setCondition(
    next,
    {
      type: 'WeightsReady',
      status: 'True',
      reason: 'AlreadyOnVolume',
      message: detail,
      observedGeneration: generation,
    },
    now,
  );
}

function errorOf(failure: FailureInfo, step: Step, generation: number, now: string): ModelError {
  return { reason: failure.reason, message: failure.message, at: now, step, generation };
}

/** A step failed in a way the workflow retries: shown as lastError and on the step's condition; the phase stays. */
export function retryingStep(
  status: ModelStatus,
  step: Step,
  failure: FailureInfo,
  attempt: number,
  generation: number,
  now: string,
): ModelStatus {
  const next: ModelStatus = { ...status, lastError: errorOf(failure, step, generation, now), updatedAt: now };
  const message = `attempt ${attempt} failed, retrying: ${failure.message}`;
  return stepCondition(next, step, { status: 'False', reason: failure.reason, message }, generation, now);
}

/** A step failed for good: phase Failed until an update or a delete. */
export function failStep(
  status: ModelStatus,
  step: Step,
  failure: FailureInfo,
  generation: number,
  now: string,
): ModelStatus {
  let next = endStep(status, step, 'Failed', now, `${failure.reason}: ${failure.message}`);
  // A candidate's step: the rollout is rolled back (status/rollout.ts), and the current revision serves on.
  if (rollingOut(status)) return { ...next, lastError: errorOf(failure, step, generation, now), waiting: undefined };
  if (openEntry(next, 'update')) next = endStep(next, 'update', 'Failed', now, `failed at ${step}: ${failure.reason}`);
  next = { ...withPhase(next, 'Failed', now), lastError: errorOf(failure, step, generation, now), waiting: undefined };
  next = stepCondition(
    next,
    step,
    { status: 'False', reason: failure.reason, message: failure.message },
    generation,
    now,
  );
  return notReady(next, failure.reason, failure.message, generation, now);
}

/** Every step of `generation` succeeded. */
export function markReady(
  status: ModelStatus,
  ready: { generation: number; endpoint?: string; readyReplicas: number },
  now: string,
): ModelStatus {
  let next = status;
  if (openEntry(next, 'update')) next = endStep(next, 'update', 'Succeeded', now);
  // At zero by scaling (idleToZeroAfter): Idle; `replicas: 0` without scaling is a model stopped on purpose.
  const idle = next.replicas === 0 && next.scaling !== undefined;
  next = {
    ...withPhase(next, idle ? 'Idle' : 'Ready', now),
    observedGeneration: ready.generation,
    endpoint: ready.endpoint ?? next.endpoint,
    readyReplicas: ready.readyReplicas,
    lastError: undefined,
    waiting: undefined,
  };
  const where = next.endpoint ? ` at ${next.endpoint}` : '';
  const message = idle
    ? `no replica while no request comes: the front${where} holds the next one and wakes the model`
    : next.replicas === 0
      ? 'scaled to 0 replicas'
      : `serving ${next.servedModelName}${where} (generation ${ready.generation})`;
  return setCondition(
    next,
    {
      type: 'Ready',
      status: 'True',
      reason: idle ? 'Idle' : next.replicas === 0 ? 'ScaledToZero' : 'Ready',
      message,
      observedGeneration: ready.generation,
    },
    now,
  );
}

/** The work in progress was superseded (a newer update, a delete): its open steps are cancelled. */
export function supersede(status: ModelStatus, now: string, detail: string): ModelStatus {
  return { ...closeOpenSteps(status, 'Cancelled', now, detail), waiting: undefined };
}

/** Starts reconciling an update of a model: an `update` entry spans it until Ready, Failed or superseded. */
export function beginUpdate(status: ModelStatus, generation: number, now: string, detail: string): ModelStatus {
  const next = openEntry(status, 'degraded')
    ? endStep(status, 'degraded', 'Cancelled', now, 'ended by an update')
    : status;
  return startStep(next, 'update', generation, now, detail);
}

/**
 * A signalled update that was refused: nothing changes but a closed, failed `update` entry on the timeline (beside any
 * open one) and `lastError` saying why. The generation stays.
 */
export function refuseChange(status: ModelStatus, failure: FailureInfo, now: string): ModelStatus {
  const { generation } = status;
  const detail = `update by signal refused: ${failure.reason}: ${failure.message}`;
  const entry = { step: 'update' as const, generation, startedAt: now, endedAt: now, durationMs: 0, detail };
  return {
    ...status,
    timeline: [...status.timeline, { ...entry, outcome: 'Failed' }],
    lastError: { ...failure, at: now, step: 'update', generation, refused: 'update' },
    updatedAt: now,
  };
}

/** A look put back what had drifted: one closed `repair` entry saying what. */
export function recordRepair(status: ModelStatus, repaired: readonly string[], now: string): ModelStatus {
  return repaired.length === 0 ? status : endStep(status, 'repair', 'Succeeded', now, repaired.join('; '));
}

/** A look at a Ready, Idle or Degraded model: a problem degrades it, its absence makes it Ready (or Idle) again. */
export function observe(status: ModelStatus, observed: ObservedStatus, now: string): ModelStatus {
  if (status.phase !== 'Ready' && status.phase !== 'Idle' && status.phase !== 'Degraded') return status;
  let next: ModelStatus = status;
  if (observed.readyReplicas !== status.readyReplicas || (observed.endpoint && observed.endpoint !== status.endpoint)) {
    next = {
      ...next,
      readyReplicas: observed.readyReplicas,
      endpoint: observed.endpoint ?? next.endpoint,
      updatedAt: now,
    };
  }
  const generation = status.observedGeneration;
  const problem = observed.problem;
  if (problem) {
    const sameProblem =
      status.phase === 'Degraded' &&
      status.lastError?.reason === problem.reason &&
      status.lastError.message === problem.message;
    if (sameProblem) return next;
    if (status.phase === 'Ready' || status.phase === 'Idle') {
      next = startStep(next, 'degraded', generation, now, `${problem.reason}: ${problem.message}`);
      next = withPhase(next, 'Degraded', now);
    }
    next = { ...next, lastError: { reason: problem.reason, message: problem.message, at: now, generation } };
    return notReady(next, problem.reason, problem.message, generation, now);
  }
  if (status.phase === 'Degraded') {
    next = endStep(next, 'degraded', 'Succeeded', now);
    return markReady(next, { generation, readyReplicas: observed.readyReplicas }, now);
  }
  return next;
}

// Pod phases and progress states that mean "moving": anything else an activity reports is a waiting reason.
const PROGRESSING = new Set([
  'Running',
  'Downloading',
  'Loading',
  'Starting',
  'Progressing',
  'Succeeded',
  'Complete',
  'Completed',
  'Ready',
  'Healthy',
]);

/** Folds an activity's report into status; a late report from a step that is over changes nothing. */
export function foldProgress(
  status: ModelStatus,
  progress: StepProgress,
  current: Step | undefined,
  now: string,
): ModelStatus {
  if (!current || !stepRow(current).progress.includes(progress.step)) return status;
  const next: ModelStatus = { ...status, updatedAt: now };
  if (progress.step === 'download') {
    next.download = downloadProgress(status.download, progress, now);
  }
  if (progress.readyReplicas !== undefined) next.readyReplicas = progress.readyReplicas;
  if (PROGRESSING.has(progress.state)) {
    next.waiting = undefined;
  } else {
    const since = status.waiting?.reason === progress.state ? status.waiting.since : now;
    next.waiting = { reason: progress.state, message: progress.message ?? '', since };
  }
  return next;
}

/**
 * The bytes a finished download wrote, as its puller reported them: a download faster than the puller's progress
 * interval would otherwise show the 0 B it started with.
 */
export function downloadWritten(status: ModelStatus, bytes: number, now: string): ModelStatus {
  if (!status.download) return status;
  const { bytesPerSecond: _rate, etaSeconds: _eta, ...download } = status.download;
  return { ...status, download: { ...download, bytes, totalBytes: bytes, updatedAt: now } };
}

/** Deletion starts: whatever ran is cancelled, phase Deleting. */
export function beginTeardown(
  status: ModelStatus,
  reason: string | undefined,
  now: string,
  requestedBy?: string,
): ModelStatus {
  let next = supersede(status, now, 'cancelled by delete');
  const asked = requestedBy !== undefined ? `asked by ${requestedBy}` : undefined;
  const detail = reason !== undefined && asked !== undefined ? `${reason}, ${asked}` : (reason ?? asked);
  next = beginStep(next, 'teardown', next.generation, now, detail);
  return notReady(next, 'Deleting', reason ? `deleting: ${reason}` : 'deleting', next.generation, now);
}

/** Everything the model owned is deleted (or retained on purpose): phase Deleted. */
export function finishTeardown(
  status: ModelStatus,
  result: TeardownResult,
  attempts: number,
  now: string,
): ModelStatus {
  const retained = result.retained.length > 0 ? `; retained ${result.retained.join(', ')}` : '';
  const tries = attempts > 1 ? ` after ${attempts} attempts` : '';
  // Why and by whom, as the delete said, stays on the closed entry.
  const asked = openEntry(status, 'teardown')?.detail;
  let next = endStep(
    status,
    'teardown',
    'Succeeded',
    now,
    `deleted ${result.deleted.length} object(s)${retained}${tries}${asked ? ` (${asked})` : ''}`,
  );
  next = {
    ...withPhase(next, 'Deleted', now),
    lastError: undefined,
    waiting: undefined,
    readyReplicas: 0,
    endpoint: undefined,
  };
  return notReady(next, 'Deleted', 'the model is deleted', next.generation, now);
}
