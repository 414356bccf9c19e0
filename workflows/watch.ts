// Between reconciles: when a Ready or Degraded model is looked at — woken by the worker's watch, at least every
// safety-net interval, a Degraded one on a backoff — and how those timers are kept across wakes.
import { condition, sleep } from '@temporalio/workflow';
import { patchedUnlessPinned } from './pinned.js';
import type { ResolvedOptions } from './activity-options.js';
import type { ModelChanged, Phase } from './contract/index.js';

/**
 * Runs from before this patch look at a Ready model every watch interval (readStatus, the spec in every call); runs
 * with it wait for the worker's watch to signal a change, look by reference, and repair what drifted.
 */
const WATCH_RECONCILES = 'watch-reconciles';

/** Two looks woken back to back are at least this far apart (another controller fighting over a field). */
const MIN_LOOK_SPACING_MS = 1_000;
/** A Degraded model's first look without a wake comes this soon; later ones back off to the watch interval. */
const FIRST_DEGRADED_LOOK_MS = 1_000;

/** A timer that a wake does not cancel: one at a time, `due` once it fired, until that is taken (`forgetFired`). */
class KeptTimer {
  private running = false;
  due = false;

  /** Starts the timer unless one runs; true when it started one. */
  start(ms: number): boolean {
    if (this.running) return false;
    this.running = true;
    void sleep(ms).then(
      () => (this.due = true),
      () => undefined,
    );
    return true;
  }

  /** Forgets a timer that has fired, so the next `start` starts another; one still running is kept. */
  forgetFired(): void {
    if (!this.due) return;
    this.running = false;
    this.due = false;
  }
}

/** How the idle model looks: by the watch that reconciles, or (runs from before it) by reading status. */
export interface Looks {
  /** One look that reconciles, waiting `delayMs` first; an update or a delete interrupts it. */
  look(delayMs: number): Promise<void>;
  /** One look that reads status only (runs from before WATCH_RECONCILES). */
  readStatus(): Promise<void>;
}

export class Watch {
  /** The worker's watch saw the model's objects change since the last look. */
  private woken: ModelChanged | undefined;
  private watchReconciles: boolean | undefined;
  private lastLookAt = 0;
  /** The safety net's look: one timer at a time, kept across wakes (a wake costs no timer of its own). */
  private readonly safetyNet = new KeptTimer();
  /** Looks since the model became Degraded: the next one waits longer. */
  private degradedLooks = 0;
  /** The Degraded backoff's timer in runs with SPLIT_SAFE, kept across wakes like the safety net's. */
  private readonly degradedTimer = new KeptTimer();

  constructor(
    private readonly options: ResolvedOptions,
    /** Runs with SPLIT_SAFE (activity-options.ts): a wake cancels no timer, a look waits inside itself. */
    private readonly splitSafe: boolean,
  ) {}

  /** The worker's watch saw one of the model's objects change: look at it (when idle). */
  wake(change: ModelChanged): void {
    const objects = [...(this.woken?.objects ?? []), ...(change?.objects ?? [])];
    this.woken = { objects: [...new Set(objects)].slice(0, 8) };
  }

  /** What the watch saw during a reconcile was the reconcile's own doing, which it has just waited for. */
  forgetWakes(): void {
    this.woken = undefined;
  }

  /**
   * Waits until `due` (an update or a delete). Meanwhile a Ready model is looked at when the worker's watch wakes it,
   * and at least every safety-net interval; a Degraded one every watch interval too (it may get well without any
   * object changing); a Failed one not at all.
   */
  async idle(phase: Phase, due: () => boolean, looks: Looks): Promise<void> {
    if (phase === 'Failed') {
      await condition(due);
      return;
    }
    this.watchReconciles ??= patchedUnlessPinned(WATCH_RECONCILES);
    if (!this.watchReconciles) {
      if (!(await condition(due, this.options.watchIntervalMs))) await looks.readStatus();
      return;
    }
    const woken = () => due() || this.woken !== undefined;
    if (phase === 'Degraded') {
      // Degraded may end without any object changing (an engine that answers /health again): look again soon, then
      // less often — 1 s doubling up to the watch interval.
      const backoff = Math.min(
        FIRST_DEGRADED_LOOK_MS * 2 ** Math.min(this.degradedLooks, 10),
        this.options.watchIntervalMs,
      );
      if (!this.splitSafe) {
        this.degradedLooks++;
        await condition(woken, backoff);
      } else {
        // A wake cancels no timer (SPLIT_SAFE): the backoff's goes on, and the next idle round waits for it again.
        if (this.degradedTimer.start(backoff)) this.degradedLooks++;
        await condition(() => woken() || this.degradedTimer.due);
        this.degradedTimer.forgetFired();
      }
    } else {
      this.degradedTimer.forgetFired();
      this.degradedLooks = 0;
      this.safetyNet.start(this.options.safetyNetIntervalMs);
      await condition(() => woken() || this.safetyNet.due);
    }
    if (due()) return;
    // Woken right after a look: the next one waits a moment, so a fight with another controller stays slow. The look
    // itself waits (no timer that an update could cancel before it is sent: SPLIT_SAFE).
    const wait = this.woken ? this.lastLookAt + MIN_LOOK_SPACING_MS - Date.now() : 0;
    if (wait > 0 && !this.splitSafe && (await condition(due, wait))) return;
    this.safetyNet.forgetFired();
    this.woken = undefined;
    try {
      await looks.look(this.splitSafe && wait > 0 ? Math.ceil(wait) : 0);
    } finally {
      this.lastLookAt = Date.now();
    }
  }
}
