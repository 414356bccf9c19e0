// How many engine replicas serve: fixed (`replicas`), or following the load between bounds (`scaling`;
// docs/design/scaling.md). Pure (no Node): it is bundled into workflow code.
import { z } from 'zod';
import { parseDuration } from './quantities.js';
import { duration, int, jsonRule, rules, strict } from './rules.js';
import { scheduleSchema } from './schedule.js';
import { quote } from './text.js';

/** The most replicas `scaling` may ask for: well beyond one model's GPUs on any cluster we know of. */
const MAX_SCALED_REPLICAS = 1000;
/** Without `targetConcurrency`, a replica is asked to hold this share of its measured capacity. */
const BASELINE_TARGET_SHARE = 0.8;

const replicaBound = (what: string) =>
  int(`a whole number of replicas from 1 to ${MAX_SCALED_REPLICAS}`)
    .min(1, `must be from 1 to ${MAX_SCALED_REPLICAS}: for zero replicas while no request comes, use idleToZeroAfter`)
    .max(MAX_SCALED_REPLICAS, `must be from 1 to ${MAX_SCALED_REPLICAS}`)
    .describe(what);

export const scalingSchema = strict({
  minReplicas: replicaBound('The fewest engine pods, however quiet the model is.'),
  maxReplicas: replicaBound('The most engine pods, however busy the model is.'),
  targetConcurrency: z
    .number({ error: 'must be a number of requests above 0, like 6' })
    .gt(0, 'must be a number of requests above 0, like 6')
    .max(100_000, 'must be at most 100000')
    .optional()
    .describe(
      `The requests in flight (running and waiting, vLLM's vllm:num_requests_running + vllm:num_requests_waiting) each replica should hold; replicas = ⌈load ÷ this⌉. Unset: ${BASELINE_TARGET_SHARE} × the measured status.baseline.maxConcurrency, which needs slo.`,
    ),
  scaleUpAfter: duration('15s')
    .default('15s')
    .describe('The load must call for more replicas this long before they are added, like 15s.'),
  scaleDownAfter: duration('5m')
    .default('5m')
    .describe('The load must call for fewer replicas this long before they are removed, like 5m.'),
  idleToZeroAfter: duration('30m')
    .optional()
    .describe(
      'No request for this long → 0 replicas (the volume and the weights stay; the phase is Idle), like 30m; at least 1m. Needs front: at zero the front holds a request and wakes the model, which answers it once a replica is ready. Not while a schedule window is open. Unset: never below minReplicas.',
    ),
  schedule: scheduleSchema.optional(),
});

/** The shortest `idleToZeroAfter`: a front's count of requests is read every few seconds, and a quiet minute is short. */
export const MIN_IDLE_TO_ZERO_MS = 60_000;

export type ScalingSpec = z.output<typeof scalingSchema>;

/** An RFC 3339 time with a zone: `2027-01-31T00:00:00Z`, `2027-01-31T09:00:00+01:00`. */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/u;

export const expiresAtSchema = rules(z.string({ error: 'must be a time like 2027-01-31T00:00:00Z' }), (v) => {
  const match = RFC3339.exec(v);
  if (!match || Number.isNaN(Date.parse(v))) {
    return `must be an RFC 3339 time with a zone, like 2027-01-31T00:00:00Z, got ${quote(v)}`;
  }
  const [year, month, day] = match.slice(1, 4).map(Number) as [number, number, number];
  // Date.parse rolls 2027-02-30 over into March: a day the month does not have is refused.
  const real = new Date(Date.UTC(year, month - 1, day));
  return real.getUTCMonth() === month - 1 && real.getUTCDate() === day
    ? undefined
    : { message: `must name a day the month has, got ${quote(v)}`, rule: 'real-time' };
}).meta(jsonRule(RFC3339));

/** Why `expiresAt` cannot be accepted at `nowMs` (it has passed), or undefined. */
export function expiredProblem(expiresAt: string | undefined, nowMs: number): string | undefined {
  if (expiresAt === undefined || Date.parse(expiresAt) > nowMs) return undefined;
  return `is in the past (${expiresAt}): the model would be deleted at once; delete it instead, or give a later time`;
}

/** The count the engine starts at: `replicas`, within scaling's bounds. */
export function startingReplicas(replicas: number, scaling: ScalingSpec | undefined): number {
  if (!scaling) return replicas;
  return Math.min(Math.max(replicas, scaling.minReplicas), scaling.maxReplicas);
}

/** The policy the worker's autoscaler applies, durations in milliseconds; no target until one is known. */
export interface ScalingPolicy {
  minReplicas: number;
  maxReplicas: number;
  targetConcurrency: number;
  scaleUpAfterMs: number;
  scaleDownAfterMs: number;
  /** Set when the model may go to zero now: no request through its front for this long. */
  idleToZeroAfterMs?: number;
}

/** `scaling` with its target: the spec's, else a share of the measured capacity; undefined while neither is known. */
export function scalingPolicy(scaling: ScalingSpec, measuredMaxConcurrency?: number): ScalingPolicy | undefined {
  const target =
    scaling.targetConcurrency ??
    (measuredMaxConcurrency !== undefined ? Math.max(1, measuredMaxConcurrency * BASELINE_TARGET_SHARE) : undefined);
  if (target === undefined) return undefined;
  return {
    minReplicas: scaling.minReplicas,
    maxReplicas: scaling.maxReplicas,
    targetConcurrency: target,
    scaleUpAfterMs: parseDuration(scaling.scaleUpAfter),
    scaleDownAfterMs: parseDuration(scaling.scaleDownAfter),
    ...(scaling.idleToZeroAfter !== undefined ? { idleToZeroAfterMs: parseDuration(scaling.idleToZeroAfter) } : {}),
  };
}
