// The autoscaler's decision for one model: how many replicas its load calls for, and whether to move to that count
// now. Kubernetes' HPA rule: a count per target concurrency, acted on only once the load has called for it for a
// stabilisation window, in bounded steps. Pure: times come in as milliseconds, and the caller keeps the memory.
import type { ScalingPolicy } from '../../workflows/contract/index.js';

/**
 * One reading of the model's load: the sum over its ready replicas of vllm:num_requests_running +
 * vllm:num_requests_waiting.
 */
export interface LoadSample {
  readonly at: number; // ms
  readonly load: number; // >= 0
}

/**
 * What the rule remembers between readings: recent recommendations, oldest first. Plain data (JSON-safe). Each one is
 * in force from its `at` until the next one's; the last one is the last reading's, at its own time.
 *
 * Thinned so that it stays small at any reading rate: an entry is kept only while it is lower than every later one
 * (it may still be a window's minimum) or higher than every later one (a window's maximum). A dropped entry's time is
 * handed to the next kept one, so the minimum and the maximum over every window ending now stay exactly what the raw
 * readings give, and so does how long the load has called for more or fewer. The kept values other than the last are
 * a rising and a falling run inside min..max: at most maxReplicas - minReplicas + 2 entries, whatever the rate.
 */
export interface ScalerMemory {
  readonly recommendations: readonly { readonly at: number; readonly replicas: number }[];
}

type Entry = ScalerMemory['recommendations'][number];

export const EMPTY_MEMORY: ScalerMemory = { recommendations: [] };

/** ⌈load ÷ target⌉ within min..max (a load of 0 → minReplicas). */
export function recommend(policy: ScalingPolicy, load: number): number {
  // A hair over a whole number from the division (1.1 / 0.1 is 11.000000000000002) does not call for another replica.
  return clamp(policy, load > 0 ? Math.ceil(load / policy.targetConcurrency - 1e-9) : 0);
}

export interface Decision {
  readonly memory: ScalerMemory; // the memory to keep for the next reading
  readonly replicas?: number; // set only when the count should change: the new desired count
  readonly reason: string; // one line for people: why it changes, or why it holds
}

/**
 * One reading: `current` is the desired replica count now in force (the Deployment's spec.replicas, NOT the number of
 * ready pods: replicas that cannot be scheduled must never block a scale-down).
 */
export function decide(policy: ScalingPolicy, memory: ScalerMemory, sample: LoadSample, current: number): Decision {
  const { minReplicas: min, maxReplicas: max, scaleUpAfterMs: upAfter, scaleDownAfterMs: downAfter } = policy;
  const last = memory.recommendations.at(-1);
  // Every entry starts strictly after the one before it: a second reading at the same time would have no span.
  if (last !== undefined && sample.at <= last.at) {
    return { memory, reason: `reading at ${sample.at} is not after the last one (${last.at}): ignored` };
  }
  const wanted = recommend(policy, sample.load);
  const horizon = sample.at - Math.max(upAfter, downAfter);
  const kept = remember(memory.recommendations, { at: sample.at, replicas: wanted }, horizon);
  const next: ScalerMemory = { recommendations: kept };
  if (current < min || current > max) {
    const replicas = clamp(policy, current);
    return {
      memory: next,
      replicas,
      reason: `${current} replicas is outside the policy's ${min}..${max}: ${current} → ${replicas}`,
    };
  }
  const load = `load ${+sample.load.toFixed(2)} over target ${policy.targetConcurrency}`;
  if (wanted === current) return { memory: next, reason: `${load} calls for ${wanted}, as now` };

  // The latest recommendation is in both windows: only the direction it points to can be due.
  const up = wanted > current;
  const after = up ? upAfter : downAfter;
  const held = sample.at - heldSince(kept, (r) => (up ? r > current : r < current));
  if (held < after) {
    return { memory: next, reason: `${load} calls for ${wanted} but for ${duration(held)} of ${duration(after)}` };
  }
  const range = windowRange(kept, sample.at - after);
  if (up) {
    const step = current + Math.max(current, 4);
    const replicas = Math.min(range.low, step, max);
    const bounded = replicas < range.low ? ` (${range.low} wanted; one step at most doubles or adds 4)` : '';
    const why = `${load} has called for ${range.low} or more for ${duration(held)}: ${current} → ${replicas}`;
    return { memory: next, replicas, reason: why + bounded };
  }
  // Halving, rounded up, but always at least one fewer, so 1 can go to 0.
  const step = Math.min(Math.ceil(current / 2), current - 1);
  const replicas = Math.max(range.high, step, min);
  const bounded = replicas > range.high ? ` (${range.high} wanted; one step at most halves)` : '';
  const why = `${load} has called for ${range.high} or fewer for ${duration(held)}: ${current} → ${replicas}`;
  return { memory: next, replicas, reason: why + bounded };
}

function clamp(policy: ScalingPolicy, replicas: number): number {
  return Math.min(policy.maxReplicas, Math.max(policy.minReplicas, replicas));
}

/**
 * The memory with `entry` added, thinned (see ScalerMemory), and without what is over before `horizon`: the entries
 * that ended at or before it go, the one in force at it stays so that coverage can be judged.
 */
function remember(memory: readonly Entry[], entry: Entry, horizon: number): Entry[] {
  const kept: Entry[] = [entry]; // newest first until the end
  let low = entry.replicas;
  let high = entry.replicas;
  let dropped: number | undefined; // the time of the oldest entry dropped since the last kept one
  const handOver = () => {
    if (dropped === undefined) return;
    const newer = kept[kept.length - 1]!;
    // The last entry keeps the last reading's time (out-of-order readings are told by it): a second one takes over.
    if (newer === entry) kept.push({ at: dropped, replicas: entry.replicas });
    else kept[kept.length - 1] = { at: dropped, replicas: newer.replicas };
    dropped = undefined;
  };
  for (let i = memory.length - 1; i >= 0; i--) {
    const older = memory[i]!;
    if (older.replicas < low || older.replicas > high) {
      handOver();
      kept.push(older);
      low = Math.min(low, older.replicas);
      high = Math.max(high, older.replicas);
    } else {
      dropped = older.at;
    }
  }
  handOver();
  kept.reverse();
  let first = 0;
  while (first + 1 < kept.length && kept[first + 1]!.at <= horizon) first++;
  return kept.slice(first);
}

/** Since when every recommendation has satisfied `calls` (the oldest entry's time if all have), given the last does. */
function heldSince(kept: readonly Entry[], calls: (replicas: number) => boolean): number {
  let since = kept[0]!.at;
  for (let i = kept.length - 1; i > 0; i--) {
    if (!calls(kept[i - 1]!.replicas)) {
      since = kept[i]!.at;
      break;
    }
  }
  return since;
}

/** The lowest and highest recommendation in force at some time in [from, now]. */
function windowRange(kept: readonly Entry[], from: number): { low: number; high: number } {
  let low = Infinity;
  let high = -Infinity;
  for (let i = kept.length - 1; i >= 0; i--) {
    const replicas = kept[i]!.replicas;
    low = Math.min(low, replicas);
    high = Math.max(high, replicas);
    if (kept[i]!.at <= from) break;
  }
  return { low, high };
}

function duration(ms: number): string {
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000}m`;
  return ms >= 1000 ? `${+(ms / 1000).toFixed(3)}s` : `${ms}ms`;
}
