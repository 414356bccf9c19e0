// The `awaitPhase` update: a client's wait for a phase at a generation, decided inside the run — or let go, still
// pending, when the run closes or continues as new (the client then asks the next run).
import { condition } from '@temporalio/workflow';
import { failure, FAILURE, PHASES, waitOutcome, type AwaitPhaseInput, type ModelStatus } from './contract/index.js';

/** Rejects a phase wait that could never be decided before it reaches history. */
export function validateAwaitPhase(input: AwaitPhaseInput): void {
  const phases: unknown = input?.phases;
  if (!Array.isArray(phases) || phases.length === 0 || !phases.every((p) => PHASES.includes(p as never))) {
    throw failure(FAILURE.InvalidInput, `awaitPhase needs phases, a non-empty list of ${PHASES.join(', ')}`);
  }
  if (!Number.isInteger(input.generation) || input.generation < 0) {
    throw failure(FAILURE.InvalidInput, 'awaitPhase needs generation, a whole number ≥ 0');
  }
}

export class PhaseWaits {
  /** `awaitPhase` updates in flight. */
  private waiters = 0;
  /** The run is about to close or continue as new: waits in flight return what they have. */
  private closing = false;

  /** Resolves with the status once the wait is decided, or when the run closes (still pending: ask the next run). */
  async wait(status: () => ModelStatus, { phases, generation }: AwaitPhaseInput): Promise<ModelStatus> {
    this.waiters++;
    try {
      await condition(() => this.closing || waitOutcome(status(), phases, generation) !== 'pending');
    } finally {
      this.waiters--;
    }
    return status();
  }

  /** Someone waits for a phase: continue-as-new must first let them go (`close`). */
  get waiting(): boolean {
    return this.waiters > 0;
  }

  /** Called before the run waits for its handlers to finish and ends or continues as new. */
  close(): void {
    this.closing = true;
  }
}
