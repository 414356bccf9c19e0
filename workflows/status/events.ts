// The events in one status change: what the worker logs, counts and posts as Kubernetes Events (the `ferry` sink).
// Pure: derived from the previous and the next status alone, so every transition function reports without
// knowing it.
import type { ModelEvent, ModelStatus, TimelineEntry } from '../contract/index.js';

const keyOf = (e: TimelineEntry): string => `${e.step}|${e.generation}|${e.startedAt}`;

/** Steps started, ended and failed, the phase change, and an accepted spec, in the order they happened. */
export function statusEvents(previous: ModelStatus, next: ModelStatus): ModelEvent[] {
  if (previous === next) return [];
  const events: ModelEvent[] = [];
  if (next.generation > previous.generation) events.push(specAccepted(next));

  const error = next.lastError;
  const newError =
    error?.step !== undefined &&
    (previous.lastError?.at !== error.at ||
      previous.lastError.reason !== error.reason ||
      previous.lastError.message !== error.message);
  // A refused signal's own timeline entry is told as the refusal, not as a failed step.
  const refusal = newError && error.refused ? error : undefined;
  const before = new Map(previous.timeline.map((e) => [keyOf(e), e]));
  for (const entry of next.timeline) {
    const was = before.get(keyOf(entry));
    if (was?.outcome !== undefined) continue;
    if (refusal && !was && entry.step === 'update' && entry.startedAt === refusal.at) continue;
    if (!was && entry.outcome === undefined) {
      events.push({
        kind: 'stepStarted',
        step: entry.step,
        generation: entry.generation,
        ...(entry.detail ? { detail: entry.detail } : {}),
      });
    }
    if (entry.outcome !== undefined) {
      const bytes = entry.step === 'download' && entry.outcome === 'Succeeded' ? next.download?.bytes : undefined;
      events.push({
        kind: 'stepEnded',
        step: entry.step,
        generation: entry.generation,
        outcome: entry.outcome,
        durationMs: entry.durationMs ?? 0,
        ...(entry.detail ? { detail: entry.detail } : {}),
        ...(bytes !== undefined ? { bytes } : {}),
      });
    }
  }

  if (refusal) {
    events.push({
      kind: 'changeRefused',
      change: refusal.refused!,
      generation: refusal.generation ?? next.generation,
      reason: refusal.reason,
      message: refusal.message,
    });
  } else if (newError) {
    events.push({
      kind: 'stepFailed',
      step: error.step!,
      generation: error.generation ?? next.generation,
      reason: error.reason,
      message: error.message,
      retrying: next.phase !== 'Failed',
    });
  }

  const used = (next.usage?.gpuSeconds ?? 0) - (previous.usage?.gpuSeconds ?? 0);
  if (used > 0) events.push({ kind: 'usage', gpuSeconds: used });

  if (next.phase !== previous.phase) {
    const ready = next.conditions.find((c) => c.type === 'Ready');
    // A model woken from Idle (Starting at a generation it had served) did not begin work at its generation's start.
    const woken = previous.phase === 'Starting' && previous.observedGeneration > 0;
    const readyAfterMs =
      next.phase === 'Ready' && previous.phase !== 'Degraded' && !woken ? sinceWorkBegan(next) : undefined;
    events.push({
      kind: 'phaseChanged',
      from: previous.phase,
      to: next.phase,
      generation: next.generation,
      ...(ready?.reason ? { reason: ready.reason } : {}),
      ...(ready?.message ? { message: ready.message } : {}),
      ...(readyAfterMs !== undefined ? { readyAfterMs } : {}),
    });
  }
  return events;
}

/** From the first timeline entry of the generation now observed to the status's last change. */
function sinceWorkBegan(status: ModelStatus): number | undefined {
  const first = status.timeline.find((e) => e.generation === status.observedGeneration);
  if (!first) return undefined;
  return Math.max(0, Date.parse(status.updatedAt) - Date.parse(first.startedAt));
}

/** The accepted spec of `status.generation`, and who asked for it when the caller said. */
export function specAccepted(status: ModelStatus): ModelEvent {
  const { generation, requestedBy } = status;
  return { kind: 'specAccepted', generation, ...(requestedBy !== undefined ? { by: requestedBy } : {}) };
}
