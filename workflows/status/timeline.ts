// The timeline: one entry per step with its timing and outcome. Pure, part of the workflow bundle.
import type { ModelStatus, Step, TimelineEntry } from '../contract/index.js';
import { stepRow } from '../steps/table.js';

export type Outcome = NonNullable<TimelineEntry['outcome']>;

/** How many entries a run carries over when it continues as new. */
const CARRIED_TIMELINE_ENTRIES = 50;

function durationMs(from: string, to: string): number {
  return Math.max(0, Date.parse(to) - Date.parse(from));
}

/** Opens an entry for `step`. */
export function startStep(
  status: ModelStatus,
  step: Step,
  generation: number,
  now: string,
  detail?: string,
): ModelStatus {
  const entry: TimelineEntry = { step, generation, startedAt: now, ...(detail ? { detail } : {}) };
  return { ...status, timeline: [...status.timeline, entry], updatedAt: now };
}

/** Closes the latest open entry of `step`; without one (a step recorded only by its end) adds a closed entry. */
export function endStep(status: ModelStatus, step: Step, outcome: Outcome, now: string, detail?: string): ModelStatus {
  const index = findLastIndex(status.timeline, (e) => e.step === step && e.endedAt === undefined);
  const timeline = [...status.timeline];
  if (index < 0) {
    timeline.push({
      step,
      generation: status.generation,
      startedAt: now,
      endedAt: now,
      durationMs: 0,
      outcome,
      ...(detail ? { detail } : {}),
    });
  } else {
    const open = timeline[index]!;
    timeline[index] = {
      ...open,
      endedAt: now,
      durationMs: durationMs(open.startedAt, now),
      outcome,
      ...(detail ? { detail } : {}),
    };
  }
  return { ...status, timeline, updatedAt: now };
}

/** Records a step that did not need to run. */
export function skipStep(
  status: ModelStatus,
  step: Step,
  generation: number,
  now: string,
  detail: string,
): ModelStatus {
  const entry: TimelineEntry = {
    step,
    generation,
    startedAt: now,
    endedAt: now,
    durationMs: 0,
    outcome: 'Skipped',
    detail,
  };
  return { ...status, timeline: [...status.timeline, entry], updatedAt: now };
}

/** Closes every open entry (a reconcile was superseded, the model is being deleted). */
export function closeOpenSteps(status: ModelStatus, outcome: Outcome, now: string, detail?: string): ModelStatus {
  if (!status.timeline.some((e) => e.endedAt === undefined)) return status;
  const timeline = status.timeline.map((e) =>
    e.endedAt === undefined
      ? { ...e, endedAt: now, durationMs: durationMs(e.startedAt, now), outcome, ...(detail ? { detail } : {}) }
      : e,
  );
  return { ...status, timeline, updatedAt: now };
}

/** The step running now: the latest open entry that is a piece of work. */
export function currentStep(status: ModelStatus): Step | undefined {
  const index = findLastIndex(status.timeline, (e) => e.endedAt === undefined && !stepRow(e.step).span);
  return index < 0 ? undefined : status.timeline[index]!.step;
}

/** The latest open entry of `step`, if any. */
export function openEntry(status: ModelStatus, step: Step): TimelineEntry | undefined {
  const index = findLastIndex(status.timeline, (e) => e.step === step && e.endedAt === undefined);
  return index < 0 ? undefined : status.timeline[index];
}

/** Keeps the last `keep` entries, and every open one. */
export function trimTimeline(status: ModelStatus, keep = CARRIED_TIMELINE_ENTRIES): ModelStatus {
  if (status.timeline.length <= keep) return status;
  const cut = status.timeline.length - keep;
  return { ...status, timeline: status.timeline.filter((e, i) => i >= cut || e.endedAt === undefined) };
}

function findLastIndex<T>(items: readonly T[], predicate: (item: T) => boolean): number {
  for (let i = items.length - 1; i >= 0; i--) if (predicate(items[i]!)) return i;
  return -1;
}
