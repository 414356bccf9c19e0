// The worker's side of the `ferry` sink (workflows/contract/model-events.ts): each status change a model's workflow
// reports becomes one log line a person can follow, Ferry's metrics, and for the transitions a `kubectl describe`
// reader needs, a Kubernetes Event on the model's root ConfigMap. Runs outside the workflow sandbox, only for work
// that is not being replayed.
import type { WorkflowInfo } from '@temporalio/workflow';
import type { InjectedSinks, Logger } from '@temporalio/worker';
import type { EventRecorder, ModelEventNote } from '../activities/cluster/events.js';
import {
  workflowIdFor,
  type FerrySinks,
  type ModelEvent,
  type ModelEventSubject,
} from '../workflows/contract/index.js';
import type { FerryMetrics } from './metrics.js';

export interface ModelEventsDeps {
  logger: Logger;
  metrics?: FerryMetrics;
  /** Unset (stub activities, no cluster): no Kubernetes Events. */
  events?: EventRecorder;
}

export function modelEventsSinks(deps: ModelEventsDeps): InjectedSinks<FerrySinks> {
  return {
    ferry: {
      modelEvents: {
        fn: (info: WorkflowInfo, subject: ModelEventSubject, events: ModelEvent[]) =>
          reportModelEvents(deps, info, subject, events),
        callDuringReplay: false,
      },
    },
  };
}

export function reportModelEvents(
  { logger, metrics, events: recorder }: ModelEventsDeps,
  info: Pick<WorkflowInfo, 'workflowId'>,
  subject: ModelEventSubject,
  events: readonly ModelEvent[],
): void {
  const fields = {
    model: subject.name,
    namespace: subject.namespace,
    cluster: subject.cluster,
    workflowId: info.workflowId || workflowIdFor(subject),
  };
  for (const [level, message, meta] of logLines(events)) logger[level](message, { ...fields, ...meta });
  metrics?.record(events, subject);
  if (recorder && subject.rootUid) {
    const target = { namespace: subject.namespace, name: subject.name, rootUid: subject.rootUid };
    for (const note of events.flatMap(kubernetesEvent)) void recorder.record(target, note);
  }
}

type Level = 'info' | 'warn' | 'error';

/**
 * One line per event: what happened in the message, the rest as fields. A step that ends the reconcile is one line
 * with both its duration and its reason.
 */
function logLines(events: readonly ModelEvent[]): [Level, string, Record<string, unknown>][] {
  const final = (e: ModelEvent) => e.kind === 'stepFailed' && !e.retrying;
  const reasonOf = events.find(final) as Extract<ModelEvent, { kind: 'stepFailed' }> | undefined;
  return events
    .filter((e) => !(final(e) && events.some((o) => o.kind === 'stepEnded' && o.outcome === 'Failed')))
    .flatMap((e) => (e.kind === 'usage' ? [] : [e]))
    .map((e) => {
      const line = logLine(e);
      if (e.kind !== 'stepEnded' || e.outcome !== 'Failed' || reasonOf?.step !== e.step) return line;
      return ['error', line[1], { ...line[2], reason: reasonOf.reason, message: reasonOf.message }];
    });
}

function logLine(event: Exclude<ModelEvent, { kind: 'usage' }>): [Level, string, Record<string, unknown>] {
  switch (event.kind) {
    case 'specAccepted':
      return ['info', 'spec accepted', { generation: event.generation, ...(event.by ? { by: event.by } : {}) }];
    case 'stepStarted':
      return [
        'info',
        `${event.step} started`,
        { step: event.step, generation: event.generation, ...(event.detail ? { detail: event.detail } : {}) },
      ];
    case 'stepEnded':
      return [
        event.outcome === 'Failed' ? 'warn' : 'info',
        `${event.step} ${event.outcome.toLowerCase()}`,
        {
          step: event.step,
          generation: event.generation,
          outcome: event.outcome,
          durationMs: event.durationMs,
          ...(event.detail ? { detail: event.detail } : {}),
          ...(event.bytes !== undefined ? { bytes: event.bytes } : {}),
        },
      ];
    case 'stepFailed':
      return [
        event.retrying ? 'warn' : 'error',
        `${event.step} failed${event.retrying ? ', retrying' : ''}`,
        { step: event.step, generation: event.generation, reason: event.reason, message: event.message },
      ];
    case 'changeRefused':
      return [
        'warn',
        `${event.change} signal refused`,
        { change: event.change, generation: event.generation, reason: event.reason, message: event.message },
      ];
    case 'phaseChanged':
      return [
        event.to === 'Failed' ? 'error' : event.to === 'Degraded' ? 'warn' : 'info',
        `phase ${event.to}`,
        {
          phase: event.to,
          from: event.from,
          generation: event.generation,
          ...(event.reason ? { reason: event.reason } : {}),
          ...(event.message ? { message: event.message } : {}),
          ...(event.readyAfterMs !== undefined ? { durationMs: event.readyAfterMs } : {}),
        },
      ];
  }
}

/** The Kubernetes Events of one model event: phase changes that matter, accepted updates, repairs, teardown. */
export function kubernetesEvent(event: ModelEvent): ModelEventNote[] {
  switch (event.kind) {
    case 'usage':
      return [];
    case 'specAccepted':
      return event.generation > 1
        ? [
            {
              type: 'Normal',
              reason: 'UpdateAccepted',
              message: `generation ${event.generation} accepted${event.by ? `, asked by ${event.by}` : ''}`,
            },
          ]
        : [];
    case 'stepStarted':
      return event.step === 'teardown'
        ? [{ type: 'Normal', reason: 'Deleting', message: event.detail ? `deleting: ${event.detail}` : 'deleting' }]
        : [];
    case 'stepEnded':
      if (event.step === 'repair') return [{ type: 'Normal', reason: 'Repaired', message: event.detail ?? 'repaired' }];
      if (event.step === 'scale') return [{ type: 'Normal', reason: 'Scaled', message: event.detail ?? 'scaled' }];
      if (event.step === 'teardown' && event.outcome === 'Succeeded')
        return [{ type: 'Normal', reason: 'Deleted', message: event.detail ?? 'deleted' }];
      return [];
    case 'stepFailed':
      // A failure that ends the reconcile is the Failed phase's Event.
      return event.retrying
        ? [
            {
              type: 'Warning',
              reason: 'Retrying',
              message: `${event.step} (generation ${event.generation}) failed, retrying: ${event.reason}: ${event.message}`,
            },
          ]
        : [];
    case 'changeRefused':
      return [
        {
          type: 'Warning',
          reason: 'ChangeRefused',
          message: `${event.change} by signal refused, generation ${event.generation} stays: ${event.reason}: ${event.message}`,
        },
      ];
    case 'phaseChanged': {
      const why = [event.reason, event.message].filter(Boolean).join(': ');
      if (event.to === 'Ready') return [{ type: 'Normal', reason: 'Ready', message: event.message ?? 'Ready' }];
      if (event.to === 'Degraded' || event.to === 'Failed') {
        return [{ type: 'Warning', reason: event.to, message: why || event.to }];
      }
      return [];
    }
  }
}
