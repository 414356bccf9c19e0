// One streamed completion request, timed the way vLLM's `bench serve` times it: time to first token from the moment
// the request is sent, and the inter-token latency averaged over the rest of the answer.
import { performance } from 'node:perf_hooks';
import { answerForMessage, formatBytes } from '../engine-answers.js';
import { MAX_EVENT_BYTES, SseDecoder } from './sse.js';

/** The engine under load: vLLM's OpenAI-compatible server. */
export interface ProbeTarget {
  /** Base URL of the server, e.g. `http://qwen.models.svc:8000`; `/v1/completions` is appended. */
  readonly url: string;
  /** A served model name. */
  readonly model: string;
  /** Sent with every request (e.g. `authorization`); never logged, and their values are cut out of error messages. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Defaults to the global fetch. */
  readonly fetch?: typeof fetch;
}

/** How one request ended: `stopped` means the probe itself aborted it, so it counts neither way. */
export type RequestOutcome =
  | { readonly kind: 'completed'; readonly ttftMs: number; readonly itlMs: number; readonly outputTokens: number }
  | { readonly kind: 'failed'; readonly error: string }
  | { readonly kind: 'stopped' };

interface CompletionRequest {
  readonly prompt: readonly number[];
  readonly outputTokens: number;
}

interface RequestBounds {
  readonly timeoutMs: number;
  /** Aborted when the probe stops: the request then ends as `stopped`. */
  readonly stop: AbortSignal;
}

const STOPPED: RequestOutcome = { kind: 'stopped' };
// Enough for vLLM's error sentence; an engine that answers with a whole HTML page should not fill the heartbeat.
const MESSAGE_LIMIT = 300;
// Header values are redacted whole, and so are their long words: a server may echo the token without `Bearer `.
const SECRET_WORD_MIN_LENGTH = 8;

/** Sends one streamed completion and waits for its end; never rejects. */
export async function sendCompletion(
  target: ProbeTarget,
  request: CompletionRequest,
  { timeoutMs, stop }: RequestBounds,
): Promise<RequestOutcome> {
  if (stop.aborted) return STOPPED;
  const controller = new AbortController();
  const onStop = () => controller.abort(stop.reason);
  stop.addEventListener('abort', onStop, { once: true });
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  try {
    const outcome = await exchange(target, request, controller.signal);
    return outcome.kind === 'failed' ? failure(fitToKeep(outcome.error, target.headers)) : outcome;
  } catch (error) {
    if (stop.aborted) return STOPPED;
    // The only other abort is the timer's.
    const message = controller.signal.aborted ? `timed out after ${timeoutMs} ms` : describe(error);
    return failure(fitToKeep(message, target.headers));
  } finally {
    clearTimeout(timer);
    stop.removeEventListener('abort', onStop);
  }
}

/**
 * The body vLLM's benchmark sends for a fixed-length workload: exactly `outputTokens` tokens (`min_tokens` and
 * `ignore_eos` keep the model from stopping early), greedy, streamed, with the usage chunk for the token count.
 */
function completionBody(model: string, { prompt, outputTokens }: CompletionRequest) {
  return {
    model,
    prompt,
    max_tokens: outputTokens,
    min_tokens: outputTokens,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
    temperature: 0,
  };
}

async function exchange(target: ProbeTarget, request: CompletionRequest, signal: AbortSignal) {
  const headers = new Headers(target.headers);
  headers.set('content-type', 'application/json');
  headers.set('accept', 'text/event-stream');
  const sentAt = performance.now();
  const res = await (target.fetch ?? fetch)(`${target.url.replace(/\/+$/, '')}/v1/completions`, {
    method: 'POST',
    headers,
    body: JSON.stringify(completionBody(target.model, request)),
    signal,
  });
  if (res.status !== 200) return failure(`HTTP ${res.status}: ${await answerForMessage(res)}`);
  if (res.body === null) return failure('HTTP 200 without a body');
  return readStream(res.body, sentAt);
}

/**
 * The most one completion's stream may be: a token's chunk is about 300 bytes, so far more than any workload's answer
 * (an event is bounded by SseDecoder).
 */
const MAX_STREAM_BYTES = 64 * 1024 * 1024;

async function readStream(body: ReadableStream<Uint8Array>, sentAt: number): Promise<RequestOutcome> {
  const text = new TextDecoder();
  const sse = new SseDecoder();
  const timing = new StreamTiming(sentAt);
  let received = 0;
  // Leaving the loop (at [DONE], on an error chunk or past a bound) cancels the body, which releases the connection.
  for await (const bytes of body) {
    received += bytes.byteLength;
    if (received > MAX_STREAM_BYTES) return failure(`the stream is larger than ${formatBytes(MAX_STREAM_BYTES)}`);
    const payloads = sse.push(text.decode(bytes, { stream: true }));
    if (payloads === undefined) return failure(`a stream event is larger than ${formatBytes(MAX_EVENT_BYTES)}`);
    for (const payload of payloads) {
      if (payload === '[DONE]') return timing.outcome();
      const problem = timing.record(payload);
      if (problem !== undefined) return failure(problem);
    }
  }
  return failure('stream ended before [DONE]');
}

/** Token arrival times of one stream. */
class StreamTiming {
  private firstAt: number | undefined;
  private lastAt = 0;
  private tokenChunks = 0;
  private usageTokens: number | undefined;

  constructor(private readonly sentAt: number) {}

  /** Takes one data payload; returns why the stream failed when the payload says it did (or is not a chunk). */
  record(payload: string): string | undefined {
    const now = performance.now();
    const chunk = parseChunk(payload);
    if (chunk === undefined) return `unexpected stream chunk: ${payload}`;
    // vLLM reports an error after the stream has started as a chunk of its own, and a request it refuses while
    // streaming too: HTTP 200, then `data: {"error": {"message": …, "code": 400}}` and [DONE] (vLLM 0.32, e.g.
    // "Token id 8232 is out of vocabulary"). Its code is the status the same request would get unstreamed.
    if (chunk.error !== undefined) {
      const code = isRecord(chunk.error) ? chunk.error.code : undefined;
      const message = isRecord(chunk.error) ? chunk.error.message : undefined;
      return typeof code === 'number' && typeof message === 'string'
        ? `HTTP ${code} in the stream: ${message}`
        : `stream error: ${JSON.stringify(chunk.error)}`;
    }
    if (carriesText(chunk.choices)) {
      this.firstAt ??= now;
      this.lastAt = now;
      this.tokenChunks += 1;
    }
    const usage = chunk.usage;
    if (isRecord(usage) && typeof usage.completion_tokens === 'number') this.usageTokens = usage.completion_tokens;
    return undefined;
  }

  /** The stream's measurements once [DONE] has arrived. */
  outcome(): RequestOutcome {
    if (this.firstAt === undefined) return failure('stream carried no tokens');
    // A chunk may carry several tokens; the usage chunk, when the engine sends it, has the true count.
    const outputTokens = this.usageTokens ?? this.tokenChunks;
    const itlMs = outputTokens > 1 ? (this.lastAt - this.firstAt) / (outputTokens - 1) : 0;
    return { kind: 'completed', ttftMs: this.firstAt - this.sentAt, itlMs, outputTokens };
  }
}

function parseChunk(payload: string): Record<string, unknown> | undefined {
  try {
    const chunk: unknown = JSON.parse(payload);
    return isRecord(chunk) ? chunk : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether a chunk carries a generated token: a completion choice, its text possibly empty (vLLM 0.32 sends '' for a
 * token that ends inside a UTF-8 character, two chunks in three of the tiny model's streams), as vLLM's own
 * `bench serve` counts them. The usage chunk has no choices.
 */
function carriesText(choices: unknown): boolean {
  return Array.isArray(choices) && choices.some((choice) => isRecord(choice) && typeof choice.text === 'string');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const failure = (error: string): RequestOutcome => ({ kind: 'failed', error });

/** `message` with no header value in it (redacted before cutting, so no part of one survives), on one line, bounded. */
function fitToKeep(message: string, headers: ProbeTarget['headers']): string {
  let clean = message;
  for (const secret of secretsOf(headers)) clean = clean.split(secret).join('[redacted]');
  clean = clean.replace(/\s+/g, ' ').trim();
  return clean.length > MESSAGE_LIMIT ? `${clean.slice(0, MESSAGE_LIMIT)}…` : clean;
}

/** Longest first, so a whole value is cut out before any of its words. */
function secretsOf(headers: ProbeTarget['headers']): string[] {
  const values = Object.values(headers ?? {}).filter((value) => value !== '');
  const words = values.flatMap((value) => value.split(/\s+/)).filter((word) => word.length >= SECRET_WORD_MIN_LENGTH);
  return [...new Set([...values, ...words])].sort((a, b) => b.length - a.length);
}

/** fetch's errors say little ("fetch failed", "terminated"); the cause says what happened on the socket. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  return error.cause instanceof Error ? `${error.message}: ${error.cause.message}` : error.message;
}
