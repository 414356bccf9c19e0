// The highest concurrency that meets the latency goal: double from 1 until a probe fails (or the cap passes), then
// bisect between the last pass and the first failure. Each probe is a real load step on the engine, so their number
// is kept logarithmic: at most about 2·log2(cap) + 1.
import { DEFAULT_REQUESTS_PER_CLIENT, type ProbeResult, type Workload } from './probe.js';

interface SearchOptions {
  /** The highest concurrency probed; the search stops there when it passes. */
  readonly maxConcurrency: number;
  /** Called after each probe, with its place in the order (the activity heartbeats here). */
  readonly onProbe?: (result: ProbeResult, index: number) => void | Promise<void>;
}

export interface SearchResult {
  /** The highest concurrency that passed with the next one up failing (or being the cap); 0 when even 1 failed. */
  readonly maxConcurrency: number;
  /** The probe at `maxConcurrency`; undefined when it is 0. */
  readonly at: ProbeResult | undefined;
  /** Every probe, in the order made. */
  readonly probes: readonly ProbeResult[];
  /** The cap itself passed: the engine may do better than `maxConcurrency`. */
  readonly capped: boolean;
}

/** The most a whole search can send, each figure the worst case over every way the probes can turn out. */
interface PlannedLoad {
  readonly probes: number;
  readonly requests: number;
  readonly promptTokens: number;
  readonly outputTokens: number;
}

/** What the search knows: the highest concurrency that passed (0 before any did) and the lowest that failed. */
interface Bracket {
  readonly pass: number;
  readonly fail: number | undefined;
}

const START: Bracket = { pass: 0, fail: undefined };

/** Deterministic for a deterministic `probeAt`; a rejection from `probeAt` or `onProbe` ends the search with it. */
export async function findMaxConcurrency(
  probeAt: (concurrency: number) => Promise<ProbeResult>,
  { maxConcurrency: cap, onProbe }: SearchOptions,
): Promise<SearchResult> {
  checkCap(cap);
  const probes: ProbeResult[] = [];
  let bracket = START;
  let at: ProbeResult | undefined;
  for (let c = nextConcurrency(bracket, cap); c !== undefined; c = nextConcurrency(bracket, cap)) {
    const result = await probeAt(c);
    probes.push(result);
    await onProbe?.(result, probes.length - 1);
    bracket = narrow(bracket, c, result.meets);
    // Passes only ever raise the bracket's floor, so the latest pass is the probe at the answer.
    if (result.meets) at = result;
  }
  return { maxConcurrency: bracket.pass, at, probes, capped: bracket.fail === undefined };
}

/** The upper bound on what `findMaxConcurrency` up to `maxConcurrency` sends, with `probe`'s requests per client. */
export function plannedLoad(
  workload: Workload,
  maxConcurrency: number,
  requestsPerClient = DEFAULT_REQUESTS_PER_CLIENT,
): PlannedLoad {
  checkCap(maxConcurrency);
  const worst = worstCase(START, maxConcurrency);
  const requests = worst.concurrencySum * requestsPerClient;
  return {
    probes: worst.probes,
    requests,
    promptTokens: requests * workload.promptTokens,
    outputTokens: requests * workload.outputTokens,
  };
}

function checkCap(cap: number) {
  if (!Number.isSafeInteger(cap) || cap < 1) throw new RangeError(`maxConcurrency must be a positive integer: ${cap}`);
}

/** The next concurrency to probe, or undefined once the answer is known. */
function nextConcurrency({ pass, fail }: Bracket, cap: number): number | undefined {
  if (fail === undefined) return pass >= cap ? undefined : Math.min(Math.max(1, pass * 2), cap);
  return fail - pass > 1 ? Math.floor((pass + fail) / 2) : undefined;
}

function narrow(bracket: Bracket, concurrency: number, passed: boolean): Bracket {
  return passed ? { ...bracket, pass: concurrency } : { ...bracket, fail: concurrency };
}

/**
 * The most probes, and the largest sum of probed concurrencies, of any path from `bracket`. Every pass/fail turn is
 * followed; each answer 0..cap ends exactly one path, so this visits about 2·cap brackets.
 */
function worstCase(bracket: Bracket, cap: number): { probes: number; concurrencySum: number } {
  const c = nextConcurrency(bracket, cap);
  if (c === undefined) return { probes: 0, concurrencySum: 0 };
  const passed = worstCase(narrow(bracket, c, true), cap);
  const failed = worstCase(narrow(bracket, c, false), cap);
  return {
    probes: 1 + Math.max(passed.probes, failed.probes),
    concurrencySum: c + Math.max(passed.concurrencySum, failed.concurrencySum),
  };
}
