// A model moved from one cluster to another as one durable operation (docs/design/fleet.md, §3): MoveModelWorkflow
// serves the model's document on the target cluster, waits until it is Ready there, then tears the source down. Its
// ID names the model without its cluster, so a model has one move at a time.
import { defineQuery } from '@temporalio/workflow';
import type { ModelRef } from './identity.js';

export interface MoveModelInput {
  /** The model as it runs now. */
  from: ModelRef;
  /** The cluster it moves to. */
  to: string;
  /**
   * The model's document as the move read it from the source's workflow: served on the target with `spec.cluster` set
   * to `to`, so the target pulls its own weights and runs the same spec.
   */
  document: unknown;
  /** How long to wait for the target to be Ready; default: the target's download deadline and startup, and 10 min. */
  readyTimeoutMs?: number;
  /**
   * How long to wait for the source's teardown (default 10 min): past it, as when the source's cluster does not
   * answer, the move completes with the teardown pending, which goes on in the source's workflow until it is done.
   */
  teardownTimeoutMs?: number;
}

/** Where a move is: each step once, in this order; `aborted` ends a move cancelled before the teardown began. */
export type MoveStep = 'serve' | 'ready' | 'teardown' | 'done' | 'aborted' | 'failed';

export interface MoveStepEntry {
  step: MoveStep;
  startedAt: string;
  endedAt?: string;
  detail?: string;
}

export interface MoveStatus {
  from: ModelRef;
  to: ModelRef;
  step: MoveStep;
  /** Once the target is Ready: where clients reach the model now. */
  endpoint?: string;
  timeline: MoveStepEntry[];
  /** Why the move failed or was aborted: the target's failure, or the cancellation. */
  error?: { reason: string; message: string };
}

export interface MoveModelResult {
  from: ModelRef;
  to: ModelRef;
  /** The target's endpoint and the name clients send as `model`. */
  endpoint: string;
  servedModelName: string;
  /** What the source's teardown deleted and retained (its `retainOnDelete`). */
  deleted: string[];
  retained: string[];
  /** The source's teardown was not done within `teardownTimeoutMs`: it goes on in the source's workflow. */
  teardownPending?: boolean;
  /**
   * No worker of the source's cluster accepted its delete within `teardownTimeoutMs`: it was sent as a signal, which the
   * source's workflow applies once a worker is back (`teardownPending` as well).
   */
  teardownSignalled?: boolean;
}

/** How long a move waits for the source's teardown unless told otherwise. */
export const DEFAULT_TEARDOWN_TIMEOUT_MS = 10 * 60_000;

export const moveStatusQuery = defineQuery<MoveStatus>('ferry.moveStatus');

/** `move/<namespace>/<name>`: one move of a name at a time, whichever clusters it moves between. */
export function moveWorkflowIdFor({ namespace, name }: Pick<ModelRef, 'namespace' | 'name'>): string {
  return `move/${namespace}/${name}`;
}
