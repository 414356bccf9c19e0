// POST /v1/completions and /v1/chat/completions: vLLM 0.32's request validation and response shapes (plain and SSE),
// wrapped around the deterministic synthetic answer instead of inference. The body's fields are read in
// generation-request.ts; the responses are written in completion-responses.ts.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  respondWithChoices,
  streamChoices,
  streamError,
  type Choice,
  type Envelope,
  type Generate,
  type Kind,
  type StreamShape,
  type Usage,
} from './completion-responses.js';
import {
  parseChatRequest,
  parseCompletionRequest,
  type GenerationRequest,
  type PromptInput,
} from './generation-request.js';
import { invalidParameter, OpenAiHttpError } from './http-io.js';
import type { EngineMetrics } from './metrics.js';
import type { Scheduler } from './scheduler.js';
import { synthesizeAnswer } from './synthetic-text.js';

/** A model name a request may use: what vLLM reports back, and the adapter when it is one. */
interface ResolvedModel {
  readonly name: string;
  readonly lora?: string;
}

export interface GenerationContext {
  /** What vLLM reports back for `requested` (first served name, or the LoRA name), or undefined if unknown. */
  resolveModel(requested: string | undefined): ResolvedModel | undefined;
  /** Listed in the 404 for an unknown model, as vLLM does (`Valid aliases: …`). */
  readonly servedModelNames: readonly string[];
  readonly maxModelLen: number;
  /** The model's vocabulary size when known (from its config.json): larger token ids are refused, as vLLM does. */
  readonly vocabSize: number | undefined;
  /** vLLM's `system_fingerprint`: `vllm-<version>-<hash of the configuration>`. */
  readonly systemFingerprint: string;
  /** Every request runs through it, so latency, `num_requests_running` and `num_requests_waiting` can be observed. */
  readonly scheduler: Scheduler;
  readonly metrics: EngineMetrics;
}

export async function serveCompletion(
  req: IncomingMessage,
  res: ServerResponse,
  body: Record<string, unknown>,
  ctx: GenerationContext,
) {
  await serveGeneration('completion', req, res, parseCompletionRequest(body), ctx);
}

export async function serveChatCompletion(
  req: IncomingMessage,
  res: ServerResponse,
  body: Record<string, unknown>,
  ctx: GenerationContext,
) {
  await serveGeneration('chat', req, res, parseChatRequest(body), ctx);
}

/**
 * In vLLM 0.32's order: the body's fields (parseRequest), the stream options, the model, the prompt against the
 * context window, the sampling parameters (max_tokens is cut to the room the prompt leaves), then the token ids
 * against the vocabulary, which a streamed request learns only from its stream.
 */
async function serveGeneration(
  kind: Kind,
  req: IncomingMessage,
  res: ServerResponse,
  request: GenerationRequest,
  ctx: GenerationContext,
) {
  if (request.streamOptions && !request.stream) {
    throw invalidParameter('Stream options can only be defined when `stream=True`.', 'stream_options');
  }
  const model = ctx.resolveModel(request.model);
  if (model === undefined) throw unknownModel(request.model, ctx.servedModelNames);
  if (request.prompts.length === 0) {
    throw new OpenAiHttpError(
      400,
      'BadRequestError',
      kind === 'chat'
        ? 'Cannot apply chat template to an empty conversation. Provide at least one message.'
        : 'You must pass at least one prompt',
    );
  }
  const choices = synthesizeChoices(request, ctx.maxModelLen);
  const outOfVocabulary = outOfVocabularyError(request.prompts, ctx.vocabSize);
  if (outOfVocabulary && !request.stream) throw outOfVocabulary;

  const promptTokens = request.prompts.reduce((sum, prompt) => sum + prompt.tokens, 0);
  const completionTokens = choices.reduce((sum, choice) => sum + choice.answer.words.length, 0);
  const usage: Usage = {
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completionTokens,
    completion_tokens: completionTokens,
  };
  const envelope: Envelope = {
    id: `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${baseRequestId(req)}`,
    object: kind === 'chat' ? 'chat.completion' : 'text_completion',
    created: Math.floor(Date.now() / 1000),
    model: model.name,
  };
  if (outOfVocabulary) {
    // vLLM checks token ids once the stream has begun: a 200 whose only event is the error, then [DONE].
    streamError(res, outOfVocabulary);
    return;
  }

  // The whole request is one sequence: its choices decode side by side, one token each per step.
  const steps = Math.max(...choices.map((choice) => choice.answer.words.length));
  const signal = abortWhenClientLeaves(res);
  const generate: Generate = (onToken) => ctx.scheduler.generate(promptTokens, steps, signal, onToken, model.lora);
  const stream: StreamShape = { includeUsage: request.includeUsage, fingerprint: ctx.systemFingerprint };
  try {
    if (request.stream) {
      await streamChoices(kind, res, envelope, choices, usage, stream, generate);
    } else {
      await generate(() => undefined);
      respondWithChoices(kind, res, envelope, choices, usage, ctx.systemFingerprint);
    }
  } catch (err) {
    // vLLM aborts a request whose connection closed: nothing is left to answer, and nothing was served.
    if (signal.aborted) return;
    throw err;
  }
  ctx.metrics.recordSuccess(
    promptTokens,
    completionTokens,
    choices.map((choice) => choice.answer.finishReason),
  );
}

/** vLLM 0.32's 404 for a model it does not serve, naming the ones it does. */
export function unknownModel(requested: string | undefined, servedModelNames: readonly string[]): OpenAiHttpError {
  return new OpenAiHttpError(
    404,
    'NotFoundError',
    `The model \`${requested ?? ''}\` does not exist. Valid aliases: ${servedModelNames.join(', ')}.`,
    { param: 'model' },
  );
}

/** One choice per prompt × `n`, each answer shaped by its own prompt's token budget. */
function synthesizeChoices(request: GenerationRequest, maxModelLen: number): Choice[] {
  const budgets = request.prompts.map((prompt) => tokenBudget(prompt.tokens, request.maxTokens, maxModelLen));
  if (request.n < 1) throw new OpenAiHttpError(400, 'BadRequestError', `n must be at least 1, got ${request.n}.`);
  if (request.minTokens < 0) {
    throw new OpenAiHttpError(
      400,
      'BadRequestError',
      `min_tokens must be greater than or equal to 0, got ${request.minTokens}.`,
    );
  }
  return request.prompts.flatMap((prompt, promptIndex) => {
    const budget = budgets[promptIndex] ?? 0;
    if (request.minTokens > budget) {
      throw new OpenAiHttpError(
        400,
        'BadRequestError',
        `min_tokens must be less than or equal to max_tokens=${budget}, got ${request.minTokens}.`,
      );
    }
    const floor = request.ignoreEos ? budget : request.minTokens;
    return Array.from({ length: request.n }, (_, i) => ({
      index: promptIndex * request.n + i,
      answer: synthesizeAnswer(prompt.echo, budget, floor),
    }));
  });
}

/** vLLM's refusal of a token id its model does not have (only when the vocabulary's size is known). */
function outOfVocabularyError(prompts: readonly PromptInput[], vocabSize: number | undefined) {
  if (vocabSize === undefined) return undefined;
  for (const prompt of prompts) {
    const id = prompt.ids?.find((tokenId) => tokenId >= vocabSize);
    if (id !== undefined) return new OpenAiHttpError(400, 'BadRequestError', `Token id ${id} is out of vocabulary`);
  }
  return undefined;
}

/**
 * Aborts once the connection closes before the response is complete, so a client that leaves gives up its place in
 * the queue or its slot at once rather than when its answer would have ended.
 */
function abortWhenClientLeaves(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  if (res.destroyed) controller.abort();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

/**
 * vLLM 0.32 cuts `max_tokens` (or, unset, takes) the room the prompt leaves in the context window; a prompt longer
 * than the window is refused (vLLM tokenizes one token past it, hence "at least"), and no room at all is a
 * `max_tokens` of 0.
 */
function tokenBudget(promptTokens: number, maxTokens: number | undefined, maxModelLen: number): number {
  if (promptTokens > maxModelLen) {
    const seen = maxModelLen + 1;
    throw invalidParameter(
      `This model's maximum context length is ${maxModelLen} tokens. However, your prompt contains at least ` +
        `${seen} input tokens, which exceeds this limit even without any output tokens. Please reduce the length ` +
        'of the input prompt.',
      'input_tokens',
      seen,
    );
  }
  const budget = Math.min(maxTokens ?? Number.POSITIVE_INFINITY, maxModelLen - promptTokens);
  if (budget < 1) throw invalidParameter(`max_tokens must be at least 1, got ${budget}.`, 'max_tokens', budget);
  return budget;
}

// vLLM derives response ids from X-Request-Id when the client sends one, which lets callers correlate logs; its own
// ids are 16 hex digits.
function baseRequestId(req: IncomingMessage): string {
  const header = req.headers['x-request-id'];
  const value = Array.isArray(header) ? header[0] : header;
  return value && value !== '' ? value : randomBytes(8).toString('hex');
}
