// Whether a fatal pod problem has held across looks, rather than being caught in passing. Pure.
import type { PodProblem } from './pod-problems.js';

/**
 * Turns a failure a single look could catch in passing into one that has held: a fatal pod problem counts once it
 * was seen in consecutive looks at least `holdMs` apart (about two observations at the poll interval).
 */
export class ProblemConfirmer {
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly holdMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The first fatal problem that has held, given every problem of this look. */
  confirmed(problems: PodProblem[]): PodProblem | undefined {
    const t = this.now();
    const keys = new Set<string>();
    let held: PodProblem | undefined;
    for (const p of problems) {
      if (p.waiting) continue;
      const key = `${p.pod}/${p.reason}`;
      keys.add(key);
      const since = this.seen.get(key);
      if (since === undefined) this.seen.set(key, t);
      else if (!held && t - since >= this.holdMs) held = p;
    }
    for (const key of [...this.seen.keys()]) if (!keys.has(key)) this.seen.delete(key);
    return held;
  }
}
