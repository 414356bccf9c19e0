// POST /v1/completions and /v1/chat/completions: vLLM's request validation and response shapes (plain and SSE),
// wrapped around the deterministic synthetic answer instead of inference.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { badRequest, OpenAiHttpError, sendJson } from './http-io.js';
import type { EngineMetrics } from './metrics.js';
import type { Scheduler } from './scheduler.js';
import {
  answerDeltas,
  answerText,
  countTokens,
  synthesizeAnswer,
  type FinishReason,
  type SyntheticAnswer,
} from './synthetic-text.js';

export interface GenerationContext {
  /** The name vLLM reports back for `requested` (first served name, or the LoRA name), or undefined if unknown. */
  resolveModel(requested: string | undefined): string | undefined;
  readonly maxModelLen: number;
  /** Every request runs through it, so latency, `num_requests_running` and `num_requests_waiting` can be observed. */
  readonly scheduler: Scheduler;
  readonly metrics: EngineMetrics;
}

type Kind = 'completion' | 'chat';

interface PromptInput {
  readonly tokens: number;
  /** Text the synthetic answer echoes; empty for token-id prompts, which the stand-in cannot detokenize. */
  readonly echo: string;
}

interface GenerationRequest {
  readonly model: string | undefined;
  readonly prompts: readonly PromptInput[];
  readonly n: number;
  readonly maxTokens: number | undefined;
  /** vLLM's `min_tokens`: the answer is padded to at least this many tokens. */
  readonly minTokens: number;
  /** vLLM's `ignore_eos`: the answer runs until the token budget stops it. */
  readonly ignoreEos: boolean;
  readonly stream: boolean;
  readonly includeUsage: boolean;
}

interface Choice {
  readonly index: number;
  readonly answer: SyntheticAnswer;
}

interface Usage {
  readonly prompt_tokens: number;
  readonly total_tokens: number;
  readonly completion_tokens: number;
  readonly prompt_tokens_details: null;
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

async function serveGeneration(
  kind: Kind,
  req: IncomingMessage,
  res: ServerResponse,
  request: GenerationRequest,
  ctx: GenerationContext,
) {
  const model = ctx.resolveModel(request.model);
  if (model === undefined) {
    throw new OpenAiHttpError(404, 'NotFoundError', `The model \`${request.model ?? ''}\` does not exist.`);
  }
  const choices = synthesizeChoices(request, ctx.maxModelLen);
  const promptTokens = request.prompts.reduce((sum, prompt) => sum + prompt.tokens, 0);
  const completionTokens = choices.reduce((sum, choice) => sum + choice.answer.words.length, 0);
  const usage: Usage = {
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completionTokens,
    completion_tokens: completionTokens,
    prompt_tokens_details: null,
  };
  const envelope: Envelope = {
    id: `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${baseRequestId(req)}`,
    object: kind === 'chat' ? 'chat.completion' : 'text_completion',
    created: Math.floor(Date.now() / 1000),
    model,
  };

  // The whole request is one sequence: its choices decode side by side, one token each per step.
  const steps = Math.max(...choices.map((choice) => choice.answer.words.length));
  const signal = abortWhenClientLeaves(res);
  const generate: Generate = (onToken) => ctx.scheduler.generate(promptTokens, steps, signal, onToken);
  try {
    if (request.stream) {
      await streamChoices(kind, res, envelope, choices, request.includeUsage ? usage : undefined, generate);
    } else {
      await generate(() => undefined);
      respondWithChoices(kind, res, envelope, choices, usage);
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

/** Runs the request's sequence, calling `onToken(step)` as each decode step's tokens are due. */
type Generate = (onToken: (step: number) => void) => Promise<void>;

/** One choice per prompt × `n`, each answer shaped by its own prompt's token budget. */
function synthesizeChoices(request: GenerationRequest, maxModelLen: number): Choice[] {
  return request.prompts.flatMap((prompt, promptIndex) => {
    const budget = tokenBudget(prompt.tokens, request.maxTokens, maxModelLen);
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

interface Envelope {
  readonly id: string;
  readonly object: string;
  readonly created: number;
  readonly model: string;
}

function respondWithChoices(
  kind: Kind,
  res: ServerResponse,
  envelope: Envelope,
  choices: readonly Choice[],
  usage: Usage,
) {
  const common = { service_tier: null, system_fingerprint: null, usage, kv_transfer_params: null };
  if (kind === 'completion') {
    sendJson(res, 200, {
      ...envelope,
      choices: choices.map(({ index, answer }) => ({
        index,
        text: answerText(answer),
        logprobs: null,
        finish_reason: answer.finishReason,
        stop_reason: null,
        prompt_logprobs: null,
      })),
      ...common,
    });
  } else {
    sendJson(res, 200, {
      ...envelope,
      choices: choices.map(({ index, answer }) => ({
        index,
        message: {
          role: 'assistant',
          content: answerText(answer),
          refusal: null,
          annotations: null,
          audio: null,
          function_call: null,
          tool_calls: [],
          reasoning_content: null,
        },
        logprobs: null,
        finish_reason: answer.finishReason,
        stop_reason: null,
      })),
      ...common,
      prompt_logprobs: null,
    });
  }
}

/**
 * Server-sent events as vLLM sends them: one token per chunk, sent as the scheduler produces it (choices interleaved,
 * one token each per step), finish_reason on each choice's last, then `[DONE]`.
 */
async function streamChoices(
  kind: Kind,
  res: ServerResponse,
  envelope: Envelope,
  choices: readonly Choice[],
  usage: Usage | undefined,
  generate: Generate,
) {
  // Headers go out before the request is scheduled, as vLLM's StreamingResponse does: a queued request is a 200
  // whose first chunk is late, which is what a client measuring time to first token must see.
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  // Chat chunks have their own object type; completion chunks reuse the non-streaming one, as in OpenAI's API.
  const head = kind === 'chat' ? { ...envelope, object: 'chat.completion.chunk' } : envelope;
  const emit = (choice: Record<string, unknown> | undefined) => {
    const chunk = choice ? { ...head, choices: [choice] } : { ...head, choices: [], usage };
    res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  };
  const deltas = choices.map(({ answer }) => answerDeltas(answer));

  await generate((step) => {
    // vLLM sends the chat role chunks with the first output, so they arrive no earlier than the first token.
    if (step === 0 && kind === 'chat') {
      for (const { index } of choices) {
        emit({ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null });
      }
    }
    choices.forEach(({ index, answer }, i) => {
      const delta = deltas[i]?.[step];
      if (delta === undefined) return;
      const finishReason: FinishReason | null = step === answer.words.length - 1 ? answer.finishReason : null;
      emit(
        kind === 'chat'
          ? { index, delta: { content: delta }, logprobs: null, finish_reason: finishReason }
          : { index, text: delta, logprobs: null, finish_reason: finishReason, stop_reason: null },
      );
    });
  });
  if (usage) emit(undefined);
  res.end('data: [DONE]\n\n');
}

function tokenBudget(promptTokens: number, maxTokens: number | undefined, maxModelLen: number): number {
  if (maxTokens === undefined) {
    if (promptTokens >= maxModelLen) {
      throw new OpenAiHttpError(
        400,
        'BadRequestError',
        `This model's maximum context length is ${maxModelLen} tokens. However, your request has ${promptTokens} ` +
          'input tokens. Please reduce the length of the input messages.',
      );
    }
    // vLLM's default when the client sets no limit: whatever room the context window has left.
    return maxModelLen - promptTokens;
  }
  if (promptTokens + maxTokens > maxModelLen) {
    throw new OpenAiHttpError(
      400,
      'BadRequestError',
      `This model's maximum context length is ${maxModelLen} tokens. However, you requested ` +
        `${promptTokens + maxTokens} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). ` +
        'Please reduce the length of the messages or completion.',
    );
  }
  return maxTokens;
}

// vLLM derives response ids from X-Request-Id when the client sends one, which lets callers correlate logs.
function baseRequestId(req: IncomingMessage): string {
  const header = req.headers['x-request-id'];
  const value = Array.isArray(header) ? header[0] : header;
  return value && value !== '' ? value : randomUUID().replace(/-/g, '');
}

function parseCompletionRequest(body: Record<string, unknown>): GenerationRequest {
  return { ...parseCommon(body, optionalInt(body, 'max_tokens', 1)), prompts: parsePrompt(body.prompt) };
}

function parseChatRequest(body: Record<string, unknown>): GenerationRequest {
  // The OpenAI API renamed max_tokens for chat; vLLM honours the new name first.
  const maxTokens = optionalInt(body, 'max_completion_tokens', 1) ?? optionalInt(body, 'max_tokens', 1);
  return { ...parseCommon(body, maxTokens), prompts: [parseMessages(body.messages)] };
}

function parseCommon(body: Record<string, unknown>, maxTokens: number | undefined): Omit<GenerationRequest, 'prompts'> {
  const model = body.model;
  if (model !== undefined && model !== null && typeof model !== 'string') {
    throw badRequest('model: Input should be a valid string');
  }
  const stream = body.stream ?? false;
  if (typeof stream !== 'boolean') throw badRequest('stream: Input should be a valid boolean');
  const streamOptions = body.stream_options;
  let includeUsage = false;
  if (streamOptions !== undefined && streamOptions !== null) {
    if (!stream) throw badRequest('Stream options can only be defined when `stream=True`.');
    if (typeof streamOptions !== 'object' || Array.isArray(streamOptions)) {
      throw badRequest('stream_options: Input should be a valid dictionary');
    }
    includeUsage = (streamOptions as Record<string, unknown>).include_usage === true;
  }
  const ignoreEos = body.ignore_eos ?? false;
  if (typeof ignoreEos !== 'boolean') throw badRequest('ignore_eos: Input should be a valid boolean');
  return {
    model: model ?? undefined,
    n: optionalInt(body, 'n', 1) ?? 1,
    maxTokens,
    minTokens: optionalInt(body, 'min_tokens', 0) ?? 0,
    ignoreEos,
    stream,
    includeUsage,
  };
}

function parsePrompt(prompt: unknown): PromptInput[] {
  const missing = 'Either prompt or prompt_embeds must be provided and non-empty.';
  if (prompt === undefined || prompt === null) throw badRequest(missing);
  if (typeof prompt === 'string') return [{ tokens: countTokens(prompt), echo: prompt }];
  if (!Array.isArray(prompt) || prompt.length === 0) throw badRequest(missing);
  if (prompt.every((item) => typeof item === 'string')) {
    return prompt.map((text: string) => ({ tokens: countTokens(text), echo: text }));
  }
  if (isTokenIds(prompt)) return [{ tokens: prompt.length, echo: '' }];
  if (prompt.every((item) => Array.isArray(item) && item.length > 0 && isTokenIds(item))) {
    return prompt.map((ids: number[]) => ({ tokens: ids.length, echo: '' }));
  }
  throw badRequest('prompt: Input should be a string, a list of strings, or a list of token ids');
}

function isTokenIds(items: unknown[]): items is number[] {
  return items.every((item) => typeof item === 'number' && Number.isInteger(item) && item >= 0);
}

/**
 * Chat prompts are counted over every message's text (no chat template: the stand-in has no tokenizer), and the
 * answer echoes the last user message, which is what a reader of the reply would look for.
 */
function parseMessages(messages: unknown): PromptInput {
  if (!Array.isArray(messages)) throw badRequest('messages: Field required and must be a list');
  if (messages.length === 0) throw badRequest('messages: List should have at least 1 item');
  let tokens = 0;
  let lastUserText: string | undefined;
  let allText = '';
  for (const [i, message] of messages.entries()) {
    if (message === null || typeof message !== 'object' || Array.isArray(message)) {
      throw badRequest(`messages.${i}: Input should be a valid dictionary`);
    }
    const { role, content } = message as Record<string, unknown>;
    if (typeof role !== 'string') throw badRequest(`messages.${i}.role: Field required`);
    const text = contentText(content, i);
    tokens += countTokens(text);
    allText = `${allText} ${text}`;
    if (role === 'user') lastUserText = text;
  }
  return { tokens, echo: lastUserText ?? allText };
}

function contentText(content: unknown, messageIndex: number): string {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    // Only text parts carry words; images and audio would need a real processor.
    return content
      .map((part) => {
        const { type, text } = (part ?? {}) as Record<string, unknown>;
        return type === 'text' && typeof text === 'string' ? text : '';
      })
      .join(' ');
  }
  throw badRequest(`messages.${messageIndex}.content: Input should be a valid string or list of content parts`);
}

function optionalInt(body: Record<string, unknown>, key: string, min: number): number | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw badRequest(`${key}: Input should be a valid integer`);
  }
  if (value < min) throw new OpenAiHttpError(400, 'BadRequestError', `${key} must be at least ${min}, got ${value}.`);
  return value;
}
