// Scale to zero's half of the autoscaler's rule (docs/design/scaling.md, section 6), read from the model's front:
// a model whose front has taken no request and holds none for `idleToZeroAfter` goes to zero; a model at zero whose
// front holds a request goes to at least one at once, with no window (someone is waiting). Pure: times come in as
// milliseconds, and the caller keeps the memory. Used by the autoscaler (autoscaler.ts) for a model with
// idleToZeroAfter, each round, from its front pods' exporters.
import { formatDuration } from '../../workflows/contract/format.js';

/** One reading of the model's front, summed over its pods (`frontLoad` in load.ts, per pod). */
export interface FrontSample {
  readonly at: number; // ms
  /** Requests taken since each pod started, summed: a change of any kind (a pod restarted too) is activity. */
  readonly requests: number;
  /** Requests in the front now: held while no replica answers, queued, or being served. */
  readonly inFlight: number;
}

/** What the rule remembers between readings. Plain data (JSON-safe). */
export interface IdleMemory {
  /** The last reading's count of requests taken. */
  readonly requests?: number;
  /** When the front was last seen busy: a request taken or in it. Unset until the first reading. */
  readonly busyAt?: number;
}

export interface IdleVerdict {
  readonly memory: IdleMemory;
  /** Set only when the count should change: 0 (idle) or the count to wake to. */
  readonly replicas?: number;
  readonly reason: string;
}

/**
 * One reading of the front. `current` is the replica count in force (the Deployment's), `wakeTo` the count a model at
 * zero goes to (its floor, at least 1). The first reading starts the quiet clock: a worker that has just started has
 * seen no request, which is not the same as there having been none.
 */
export function idleVerdict(
  idleAfterMs: number,
  memory: IdleMemory,
  sample: FrontSample,
  current: number,
  wakeTo: number,
): IdleVerdict {
  const busy = sample.inFlight > 0 || (memory.requests !== undefined && sample.requests !== memory.requests);
  const busyAt = busy || memory.busyAt === undefined ? sample.at : memory.busyAt;
  const next: IdleMemory = { requests: sample.requests, busyAt };
  if (current === 0) {
    if (sample.inFlight > 0) {
      const to = Math.max(1, wakeTo);
      return { memory: next, replicas: to, reason: `${held(sample.inFlight)} at zero: 0 → ${to} at once` };
    }
    return { memory: next, reason: busy ? 'a request came and went at zero' : 'idle at zero, nothing held' };
  }
  const quiet = sample.at - busyAt;
  if (quiet >= idleAfterMs) {
    return {
      memory: next,
      replicas: 0,
      reason: `no request for ${formatDuration(quiet)} (idleToZeroAfter ${formatDuration(idleAfterMs)})`,
    };
  }
  return {
    memory: next,
    reason: busy ? 'requests in the front' : `quiet for ${formatDuration(quiet)} of ${formatDuration(idleAfterMs)}`,
  };
}

const held = (n: number) => (n === 1 ? 'a request held' : `${n} requests held`);
