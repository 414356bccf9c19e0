// A rollout's health gate (docs/design/rollout.md, section 4): after the candidate has taken its share for a while, its
// replicas are ready and answering, and — through the front, whose pods count each revision's requests since the step
// began — it failed no more requests than it may, and answered no slower than it may, beside the current revision.
import { sleep } from '@temporalio/workflow';
import type { Activities } from '../activity-options.js';
import type { FrontCounters, ObservedStatus, ServedModel, Slot } from '../contract/index.js';
import type { StepContext } from './context.js';
import type { GateVerdict } from './evaluation.js';

/** The share of the candidate's requests that may fail, when more of them fail than of the current revision's. */
const MAX_FAILED_SHARE = 0.01;
/** How much slower than the current revision the candidate may answer on average, given enough answers of each. */
const MAX_LATENCY_RATIO = 2;
/** Below this, a slower average is noise: both revisions then answer quickly. */
const LATENCY_SLACK_MS = 50;
const MIN_ANSWERS_FOR_LATENCY = 20;

/** Waits the window at `traffic` percent, then judges the candidate in `slot` named `candidate` beside `current`. */
export async function healthGate(
  ctx: StepContext,
  acts: Activities,
  spec: ServedModel,
  slot: Slot,
  revisions: { candidate: string; current: string; traffic: number },
): Promise<GateVerdict> {
  await sleep(ctx.options.healthGateWindowMs);
  const frontCounters = revisions.traffic > 0 && !!spec.spec.front;
  const seen = await acts.short.readStatus({
    model: spec,
    ...(slot === 'b' ? { slot } : {}),
    ...(frontCounters ? { frontCounters } : {}),
  });
  if (seen.problem) return { result: 'Failed', message: `${seen.problem.reason}: ${seen.problem.message}` };
  const ready = `${seen.readyReplicas} of ${seen.replicas} replicas ready and answering`;
  const front = judgeFront(seen.front, revisions.candidate, revisions.current);
  if (!front) return { result: 'Passed', message: ready };
  return { result: front.result, message: front.result === 'Passed' ? `${ready}; ${front.message}` : front.message };
}

/**
 * The candidate's requests through the front beside the current revision's; undefined when they were not asked for
 * (a step at 0 %, or a status read by an older worker).
 */
export function judgeFront(
  front: ObservedStatus['front'],
  candidate: string,
  current: string,
): GateVerdict | undefined {
  if (!front) return undefined;
  if ('unread' in front) return { result: 'Failed', message: `the front's counts could not be read: ${front.unread}` };
  const none: FrontCounters['revisions'][string] = { requests: 0, answered: 0, failed: 0 };
  const c = front.revisions[candidate] ?? none;
  const k = front.revisions[current] ?? none;
  const said = `through the front ${describe(candidate, c)}; ${describe(current, k)}`;
  if (c.requests === 0) return { result: 'Passed', message: `no request reached ${candidate} through the front yet` };
  const share = (x: typeof c) => (x.requests === 0 ? 0 : x.failed / x.requests);
  if (c.failed > 0 && share(c) > MAX_FAILED_SHARE && share(c) > share(k)) {
    return {
      result: 'Failed',
      message: `more than ${pct(MAX_FAILED_SHARE)} of ${candidate}'s requests failed, ${said}`,
    };
  }
  const [ca, ka] = [c.averageMs, k.averageMs];
  if (
    ca !== undefined &&
    ka !== undefined &&
    c.answered >= MIN_ANSWERS_FOR_LATENCY &&
    k.answered >= MIN_ANSWERS_FOR_LATENCY &&
    ca > ka * MAX_LATENCY_RATIO &&
    ca - ka > LATENCY_SLACK_MS
  ) {
    return { result: 'Failed', message: `${candidate} answered more than ${MAX_LATENCY_RATIO}× slower, ${said}` };
  }
  return { result: 'Passed', message: said };
}

function describe(revision: string, x: FrontCounters['revisions'][string]): string {
  const failed = x.requests === 0 ? '' : ` (${pct(x.failed / x.requests)})`;
  const average = x.averageMs !== undefined && x.answered > 0 ? `, ${Math.round(x.averageMs)} ms on average` : '';
  return `${revision}: ${x.failed} of ${x.requests} requests failed${failed}${average}`;
}

const pct = (x: number) => `${Math.round(x * 1000) / 10} %`;
