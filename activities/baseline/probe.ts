// One closed-loop load step, as vLLM's `bench serve --goodput` and GuideLLM's goodput profile measure it: a fixed
// number of clients, each sending its requests one after another, and the share of requests that met the latency
// goal. The load is bounded: it stops as soon as the goal is out of reach.
import { randomInt } from 'node:crypto';
import { sendCompletion, type ProbeTarget, type RequestOutcome } from './request.js';

/** The shape of every request: prompt and answer lengths in tokens. */
export interface Workload {
  readonly promptTokens: number;
  readonly outputTokens: number;
}

/** A request is good when it met both latency bounds; a probe passes when `attainment` of its requests were good. */
export interface LatencyGoal {
  /** Bound on the time to first token. */
  readonly ttftMs: number;
  /** Bound on the request's mean inter-token latency (vLLM's TPOT). */
  readonly itlMs: number;
  /** The share of good requests needed, 0 to 1. */
  readonly attainment: number;
}

interface ProbeOptions {
  /** Requests each client sends one after another; default DEFAULT_REQUESTS_PER_CLIENT. */
  readonly requestsPerClient?: number;
  /** Whole-request bound (to the end of the stream); a request past it is an error. Default 60 s. */
  readonly requestTimeoutMs?: number;
  /** Aborts every request; the probe then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Seeds the prompts' token ids; random by default, so consecutive probes do not share prompts. */
  readonly seed?: number;
  /**
   * Token ids the model has (its tokenizer's, from /tokenize); unset, ids from 1000 to 9999, which a small vocabulary
   * lacks (vLLM refuses such a prompt: "Token id 8232 is out of vocabulary").
   */
  readonly tokenIds?: readonly number[];
}

export interface ProbeResult {
  readonly concurrency: number;
  /** Requests that ended (good or bad); those the probe aborted on stopping early are not counted. */
  readonly requests: number;
  readonly good: number;
  /** Requests that did not complete: not HTTP 200, reset, no [DONE], an error chunk, or past the timeout. */
  readonly errors: number;
  /** good / requests. */
  readonly attainment: number;
  /** Nearest-rank 95th percentiles over the completed requests; undefined when none completed. */
  readonly ttftP95Ms: number | undefined;
  readonly itlP95Ms: number | undefined;
  /** Output tokens of the completed requests, summed: below requests × outputTokens when the engine stopped early. */
  readonly outputTokens: number;
  readonly meets: boolean;
  /** The goal went out of reach before every planned request was counted, so the rest were not sent or aborted. */
  readonly stoppedEarly: boolean;
  /** The first error's message, without header values, cut to a few hundred characters. */
  readonly firstError?: string;
}

export const DEFAULT_REQUESTS_PER_CLIENT = 3;
const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
// Ordinary vocabulary in every common tokenizer: clear of the byte tokens at the bottom and special tokens at the top.
const TOKEN_ID_MIN = 1000;
const TOKEN_ID_SPAN = 9000;
const PROMPT_KEYS = TOKEN_ID_SPAN * TOKEN_ID_SPAN;

/**
 * Runs `concurrency` clients against `target`, each sending `requestsPerClient` streamed completions of `workload`
 * one after another, so at most `concurrency` requests are ever in flight.
 */
export async function probe(
  target: ProbeTarget,
  concurrency: number,
  workload: Workload,
  goal: LatencyGoal,
  options: ProbeOptions = {},
): Promise<ProbeResult> {
  const requestsPerClient = options.requestsPerClient ?? DEFAULT_REQUESTS_PER_CLIENT;
  const timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  checkInputs(concurrency, requestsPerClient, timeoutMs, workload, goal);
  const { signal } = options;
  signal?.throwIfAborted();

  const stop = new AbortController();
  const cancel = () => stop.abort(signal?.reason);
  signal?.addEventListener('abort', cancel, { once: true });
  const tally = new Tally(concurrency * requestsPerClient, goal);
  const prompts = new PromptSource(workload.promptTokens, options.seed ?? randomInt(PROMPT_KEYS), options.tokenIds);
  const client = async () => {
    for (let sent = 0; sent < requestsPerClient && !stop.signal.aborted; sent += 1) {
      const request = { prompt: prompts.next(), outputTokens: workload.outputTokens };
      const outcome = await sendCompletion(target, request, { timeoutMs, stop: stop.signal });
      if (outcome.kind === 'stopped') return;
      tally.add(outcome);
      if (tally.outOfReach()) stop.abort(new Error('the latency goal is out of reach'));
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, () => client()));
  } finally {
    signal?.removeEventListener('abort', cancel);
  }
  signal?.throwIfAborted();
  return tally.result(concurrency);
}

function checkInputs(
  concurrency: number,
  requestsPerClient: number,
  timeoutMs: number,
  workload: Workload,
  goal: LatencyGoal,
) {
  const counts = { concurrency, requestsPerClient, ...workload };
  for (const [name, value] of Object.entries(counts)) {
    if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer: ${value}`);
  }
  if (!(timeoutMs > 0)) throw new RangeError(`requestTimeoutMs must be positive: ${timeoutMs}`);
  if (!(goal.ttftMs >= 0 && goal.itlMs >= 0)) throw new RangeError('goal latencies must be non-negative');
  if (!(goal.attainment >= 0 && goal.attainment <= 1)) throw new RangeError('goal.attainment must be 0 to 1');
}

/**
 * Token-id prompts, distinct from their first ids on. vLLM's prefix cache hashes a prompt in blocks, each chained to
 * the ones before, so a repeated prompt's prefill would come from memory and its TTFT would look too short; a
 * different first, second or third id makes every block new. Ids come from a counter started at the seed, each digit
 * (base: the number of ids to choose from) picking one: from the model's own ids when known, else 1000–9999.
 */
class PromptSource {
  private key: number;
  private readonly ids: readonly number[] | undefined;

  constructor(
    private readonly length: number,
    seed: number,
    ids?: readonly number[],
  ) {
    this.ids = ids && ids.length >= 2 ? ids : undefined;
    this.key = seed % this.keys;
  }

  private get span(): number {
    return this.ids?.length ?? TOKEN_ID_SPAN;
  }

  private get keys(): number {
    return this.ids ? Math.min(Number.MAX_SAFE_INTEGER, this.span ** 3) : PROMPT_KEYS;
  }

  private id(digit: number): number {
    return this.ids ? this.ids[digit % this.span]! : TOKEN_ID_MIN + (digit % TOKEN_ID_SPAN);
  }

  next(): number[] {
    const key = this.key;
    this.key = (this.key + 1) % this.keys;
    const span = this.span;
    const head = this.ids
      ? [key % span, Math.floor(key / span) % span, Math.floor(key / span / span) % span]
      : [key % span, Math.floor(key / span)];
    // The rest only has to be ordinary text-like ids; it is the same for every request.
    return Array.from({ length: this.length }, (_, i) => this.id(head[i] ?? i * 37));
  }
}

type Counted = Exclude<RequestOutcome, { kind: 'stopped' }>;

/** The probe's running counts. */
class Tally {
  private good = 0;
  private bad = 0;
  private errors = 0;
  private outputTokens = 0;
  private firstError: string | undefined;
  private readonly ttfts: number[] = [];
  private readonly itls: number[] = [];

  constructor(
    private readonly planned: number,
    private readonly goal: LatencyGoal,
  ) {}

  add(outcome: Counted) {
    if (outcome.kind === 'failed') {
      this.bad += 1;
      this.errors += 1;
      this.firstError ??= outcome.error;
      return;
    }
    this.ttfts.push(outcome.ttftMs);
    this.itls.push(outcome.itlMs);
    this.outputTokens += outcome.outputTokens;
    if (outcome.ttftMs <= this.goal.ttftMs && outcome.itlMs <= this.goal.itlMs) this.good += 1;
    else this.bad += 1;
  }

  /** Whether the goal is missed even if every request not yet counted is good (the same sum `meets` does). */
  outOfReach(): boolean {
    return (this.planned - this.bad) / this.planned < this.goal.attainment;
  }

  result(concurrency: number): ProbeResult {
    const requests = this.good + this.bad;
    const attainment = requests === 0 ? 0 : this.good / requests;
    return {
      concurrency,
      requests,
      good: this.good,
      errors: this.errors,
      attainment,
      ttftP95Ms: percentile(this.ttfts, 95),
      itlP95Ms: percentile(this.itls, 95),
      outputTokens: this.outputTokens,
      meets: attainment >= this.goal.attainment,
      stoppedEarly: requests < this.planned,
      ...(this.firstError === undefined ? {} : { firstError: this.firstError }),
    };
  }
}

/** Nearest rank: the smallest sample with at least `percent`% of the samples at or below it. */
function percentile(samples: readonly number[], percent: number): number | undefined {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.ceil((percent * sorted.length) / 100) - 1];
}
