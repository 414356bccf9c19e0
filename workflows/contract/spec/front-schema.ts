// The model's front (docs/design/scaling.md, section 6): an always-on HAProxy that the model's Service points at, which
// holds a request while no engine replica answers — a Recreate rollout, a replica restarting, later a model at zero —
// and turns away what is over its bound with 503 and Retry-After. Pure (no Node): it is bundled into workflow code.
import { duration, int, strict } from './rules.js';

/** The longest a request may be held: a front pod being replaced is given this long to finish what it holds. */
const MAX_HOLD_MS = 3_600_000;
const MAX_QUEUED = 100_000;

export const frontSchema = strict({
  holdFor: duration('10m', {
    ms: MAX_HOLD_MS,
    message: 'must be at most 1h: a front pod being replaced is given that long to finish what it holds',
    rule: 'front-hold',
  })
    .default('10m')
    .describe(
      'How long a request waits for a replica to answer before it is answered 503 with Retry-After, like 10m; at most 1h.',
    ),
  maxQueued: int(`a whole number of requests from 1 to ${MAX_QUEUED}`)
    .min(1, `must be from 1 to ${MAX_QUEUED}`)
    .max(MAX_QUEUED, `must be from 1 to ${MAX_QUEUED}`)
    .default(256)
    .describe(
      'Requests that may wait beyond those the engine is given; more are answered 503 with Retry-After at once.',
    ),
});
