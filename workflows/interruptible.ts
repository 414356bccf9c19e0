// The work that an update or a delete interrupts — a reconcile, or a look at the model: one at a time, in a
// cancellation scope of its own, so the workflow's own cancellation is told apart from an interruption.
import { CancellationScope, isCancellation } from '@temporalio/workflow';

export class Interruptible {
  private active: CancellationScope | undefined;

  /** Runs `body` in a scope that `interrupt` cancels; false when it was cancelled that way. */
  async run(body: () => Promise<void>): Promise<boolean> {
    const scope = new CancellationScope();
    this.active = scope;
    try {
      await scope.run(body);
      return true;
    } catch (err) {
      if (isCancellation(err) && scope.consideredCancelled && !CancellationScope.current().consideredCancelled)
        return false;
      throw err;
    } finally {
      this.active = undefined;
    }
  }

  /** Cancels the work running now, if any. */
  interrupt(): void {
    this.active?.cancel();
  }
}
