// What a step module works with: the lifecycle's status and world, and its step runner (lifecycle.ts implements it).
// A step module holds its row of the step table, its orchestration and its patches; the lifecycle runs them in order.
import type { ResolvedOptions } from '../activity-options.js';
import type { CarriedState, ModelStatus, ServedModel, Slot, Step } from '../contract/index.js';
import type { RolloutControl } from './rollout-control.js';

/** Where the model's objects stand in the cluster; carried over by continue-as-new. */
export type World = Omit<CarriedState, 'status' | 'attemptedGeneration'>;

/**
 * The objects a reconcile works on: the spec, the root object that owns the rest, the hash of the source, and the slot
 * of the revision whose engine objects they are (unset: `a`; docs/design/rollout.md, section 2).
 */
export interface ModelObjects {
  model: ServedModel;
  rootUid: string;
  sourceHash: string;
  slot?: Slot;
}

/** `{ slot }` for an activity's input: the current revision's slot, or `slot` (nothing for slot `a`). */
export function slotOf(from: { slot?: Slot }): { slot?: 'b' } {
  return from.slot === 'b' ? { slot: 'b' } : {};
}

export interface StepContext {
  readonly status: ModelStatus;
  /** What `ferry rollout approve|abort|undo` says to a rollout under way. */
  readonly rollout: RolloutControl;
  /** The latest accepted spec (looks and the adapters they reload work on it). */
  readonly desired: ServedModel;
  readonly world: World;
  readonly options: ResolvedOptions;
  /** Replaces the status: search attributes, the parent, Web UI details and Kubernetes Events follow it. */
  set(next: ModelStatus): void;
  /**
   * Runs one step: recorded in the timeline and conditions; a transient failure shows as lastError and the step is
   * tried again after a backoff; anything else ends the reconcile in phase Failed.
   */
  step<T>(
    name: Step,
    generation: number,
    run: () => Promise<T>,
    describe?: (result: T) => string | undefined,
  ): Promise<T>;
}

export function now(): string {
  return new Date().toISOString();
}
