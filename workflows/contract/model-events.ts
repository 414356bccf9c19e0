// What a model's workflow tells its worker as its status moves: steps starting, ending and failing, phase changes,
// accepted specs and repairs. The workflow calls the `ferry` sink with them (no history event, no billed action; not
// called when a workflow task is replayed); the worker turns them into log lines, metrics and Kubernetes Events
// (worker/model-events.ts). Best effort: a worker that crashes mid-task may report a transition twice or not at all.
import type { Sinks } from '@temporalio/workflow';
import type { ModelRef } from './identity.js';
import type { Phase, TimelineEntry } from './status.js';

export type ModelEvent =
  | { kind: 'stepStarted'; step: TimelineEntry['step']; generation: number; detail?: string }
  | {
      kind: 'stepEnded';
      step: TimelineEntry['step'];
      generation: number;
      outcome: NonNullable<TimelineEntry['outcome']>;
      durationMs: number;
      detail?: string;
      /** A finished download: the bytes it wrote. */
      bytes?: number;
    }
  | {
      /** A step's attempt failed: retried unless the phase is now Failed. */
      kind: 'stepFailed';
      step: TimelineEntry['step'];
      generation: number;
      reason: string;
      message: string;
      retrying: boolean;
    }
  | {
      kind: 'phaseChanged';
      from: Phase;
      to: Phase;
      generation: number;
      /** Why (Degraded, Failed): a reason of the failure catalogue or of a pod's state. */
      reason?: string;
      message?: string;
      /** Reaching Ready by a reconcile (not by recovering from Degraded): since the generation's work began. */
      readyAfterMs?: number;
    }
  | {
      kind: 'specAccepted';
      generation: number;
      /** Who asked, as the caller said (`status.requestedBy`). */ by?: string;
    }
  | {
      /** GPU-seconds the ready replicas held since the last such event (status.usage). */
      kind: 'usage';
      gpuSeconds: number;
    }
  | {
      /** A signalled change the workflow refused; the model stays at `generation`. */
      kind: 'changeRefused';
      change: 'update';
      generation: number;
      reason: string;
      message: string;
    };

/** The model an event is about, and the uid of its root ConfigMap once it has been claimed. */
export interface ModelEventSubject extends ModelRef {
  rootUid?: string;
}

export interface FerrySinks extends Sinks {
  ferry: {
    modelEvents(subject: ModelEventSubject, events: ModelEvent[]): void;
  };
}
