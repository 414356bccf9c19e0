// POST /v1/completions and /v1/chat/completions: vLLM 0.32's request validation and response shapes (plain and SSE),
// wrapped around the deterministic synthetic answer instead of inference.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { invalidParameter, OpenAiHttpError, sendJson } from './http-io.js';
import type { EngineMetrics } from './metrics.js';
import type { Scheduler } from './scheduler.js';
import { RequestFields } from './request-fields.js';
import {
  answerDeltas,
  answerText,
  countTokens,
  synthesizeAnswer,
  type FinishReason,
  type SyntheticAnswer,
} from './synthetic-text.js';

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

type Kind = 'completion' | 'chat';

interface PromptInput {
  readonly tokens: number;
  /** Text the synthetic answer echoes; empty for token-id prompts, which the stand-in cannot detokenize. */
  readonly echo: string;
  /** A token-id prompt's ids, checked against the vocabulary. */
  readonly ids?: readonly number[];
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
  readonly streamOptions: boolean;
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

/** Runs the request's sequence, calling `onToken(step)` as each decode step's tokens are due. */
type Generate = (onToken: (step: number) => void) => Promise<void>;

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

/** An error vLLM reports inside a stream: Python's json.dumps of the error body (its spacing), then [DONE]. */
function streamError(res: ServerResponse, error: OpenAiHttpError) {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
  const body =
    `{"error": {"message": ${JSON.stringify(error.message)}, "type": ${JSON.stringify(error.type)}, ` +
    `"param": ${JSON.stringify(error.param)}, "code": ${error.status}}}`;
  res.end(`data: ${body}\n\ndata: [DONE]\n\n`);
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

/** vLLM 0.32's response bodies, field for field (every field it sends, null where the stand-in has nothing). */
function respondWithChoices(
  kind: Kind,
  res: ServerResponse,
  envelope: Envelope,
  choices: readonly Choice[],
  usage: Usage,
  fingerprint: string,
) {
  const head = { ...envelope };
  const fullUsage = { ...usage, prompt_tokens_details: null, completion_tokens_details: null };
  const tail = { kv_transfer_params: null, ec_transfer_params: null, metrics: null };
  if (kind === 'completion') {
    sendJson(res, 200, {
      ...head,
      choices: choices.map(({ index, answer }) => ({
        index,
        text: answerText(answer),
        logprobs: null,
        finish_reason: answer.finishReason,
        stop_reason: null,
        token_ids: null,
        prompt_logprobs: null,
        prompt_token_ids: null,
        routed_experts: null,
      })),
      service_tier: null,
      system_fingerprint: fingerprint,
      usage: fullUsage,
      ...tail,
    });
  } else {
    sendJson(res, 200, {
      ...head,
      choices: choices.map(({ index, answer }) => ({
        index,
        message: {
          role: 'assistant',
          content: answerText(answer),
          refusal: null,
          annotations: null,
          audio: null,
          function_call: null,
          reasoning: null,
        },
        logprobs: null,
        finish_reason: answer.finishReason,
        stop_reason: null,
        token_ids: null,
        routed_experts: null,
      })),
      service_tier: null,
      system_fingerprint: fingerprint,
      usage: fullUsage,
      prompt_logprobs: null,
      prompt_token_ids: null,
      prompt_text: null,
      ...tail,
    });
  }
}

interface StreamShape {
  readonly includeUsage: boolean;
  readonly fingerprint: string;
}

/**
 * Server-sent events as vLLM 0.32 sends them: one token per chunk, sent as the scheduler produces it (choices
 * interleaved, one token each per step), finish_reason on each choice's last, then `[DONE]`. The fingerprint rides on
 * the last message: each finishing chunk, or the usage chunk when there is one.
 */
async function streamChoices(
  kind: Kind,
  res: ServerResponse,
  envelope: Envelope,
  choices: readonly Choice[],
  usage: Usage,
  { includeUsage, fingerprint }: StreamShape,
  generate: Generate,
) {
  // Headers go out before the request is scheduled, as vLLM's StreamingResponse does: a queued request is a 200
  // whose first chunk is late, which is what a client measuring time to first token must see.
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
  // Chat chunks have their own object type; completion chunks reuse the non-streaming one, as in OpenAI's API.
  const head = kind === 'chat' ? { ...envelope, object: 'chat.completion.chunk' } : envelope;
  const emit = (chunk: Record<string, unknown>) => res.write(`data: ${JSON.stringify({ ...head, ...chunk })}\n\n`);
  const deltas = choices.map(({ answer }) => answerDeltas(answer));

  await generate((step) => {
    // vLLM sends the chat role chunks with the first output, so they arrive no earlier than the first token.
    if (step === 0 && kind === 'chat') {
      for (const { index } of choices) {
        emit({
          choices: [{ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
          prompt_token_ids: null,
          prompt_text: null,
        });
      }
    }
    choices.forEach(({ index, answer }, i) => {
      const delta = deltas[i]?.[step];
      if (delta === undefined) return;
      const finishReason: FinishReason | null = step === answer.words.length - 1 ? answer.finishReason : null;
      const last = finishReason === null ? {} : { stop_reason: null };
      const choice =
        kind === 'chat'
          ? { index, delta: { content: delta }, logprobs: null, finish_reason: finishReason, ...last, token_ids: null }
          : {
              index,
              text: delta,
              logprobs: null,
              finish_reason: finishReason,
              stop_reason: null,
              prompt_token_ids: null,
              token_ids: null,
            };
      const stamp = finishReason !== null && !includeUsage ? { system_fingerprint: fingerprint } : {};
      emit({ choices: [choice], ...stamp });
    });
  });
  if (includeUsage) emit({ choices: [], usage, system_fingerprint: fingerprint });
  res.end('data: [DONE]\n\n');
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

// Fields are read in the order vLLM's pydantic models declare them, which is the order their errors are listed in.
function parseCompletionRequest(body: Record<string, unknown>): GenerationRequest {
  const fields = new RequestFields(body);
  const model = fields.str('model');
  const prompts = parsePrompt(fields, body.prompt);
  const maxTokens = fields.int('max_tokens');
  const rest = parseSampling(fields);
  fields.throwIfInvalid();
  const prompt = body.prompt;
  if (prompt === undefined || prompt === null || prompt === '') {
    throw invalidParameter('Either prompt or prompt_embeds must be provided and non-empty.', 'prompt');
  }
  return { model, prompts, maxTokens, ...rest };
}

function parseChatRequest(body: Record<string, unknown>): GenerationRequest {
  const fields = new RequestFields(body);
  const prompts = parseMessages(fields, body.messages);
  const model = fields.str('model');
  const maxTokens = fields.int('max_tokens');
  // The OpenAI API renamed max_tokens for chat; vLLM honours the new name first.
  const maxCompletionTokens = fields.int('max_completion_tokens');
  const rest = parseSampling(fields);
  fields.throwIfInvalid();
  return { model, prompts, maxTokens: maxCompletionTokens ?? maxTokens, ...rest };
}

/** The fields after max_tokens that both routes share, in their declared order. */
function parseSampling(fields: RequestFields): Omit<GenerationRequest, 'prompts' | 'maxTokens' | 'model'> {
  const n = fields.int('n') ?? 1;
  const stream = fields.bool('stream') ?? false;
  const streamOptions = fields.dict('stream_options');
  const ignoreEos = fields.bool('ignore_eos') ?? false;
  const minTokens = fields.int('min_tokens') ?? 0;
  return {
    n,
    minTokens,
    ignoreEos,
    stream,
    streamOptions: streamOptions !== undefined,
    includeUsage: streamOptions?.include_usage === true,
  };
}

function parsePrompt(fields: RequestFields, prompt: unknown): PromptInput[] {
  if (prompt === undefined || prompt === null) return [];
  if (typeof prompt === 'string') return prompt === '' ? [] : [{ tokens: countTokens(prompt), echo: prompt }];
  if (Array.isArray(prompt)) {
    if (prompt.every((item) => typeof item === 'string')) {
      return prompt.map((text: string) => ({ tokens: countTokens(text), echo: text }));
    }
    if (isTokenIds(prompt)) return [{ tokens: prompt.length, echo: '', ids: prompt }];
    if (prompt.every((item) => Array.isArray(item) && item.length > 0 && isTokenIds(item))) {
      return prompt.map((ids: number[]) => ({ tokens: ids.length, echo: '', ids }));
    }
  }
  fields.invalid({ type: 'string_type', loc: ['prompt'], msg: 'Input should be a valid string', input: prompt });
  return [];
}

function isTokenIds(items: unknown[]): items is number[] {
  return items.every((item) => typeof item === 'number' && Number.isInteger(item) && item >= 0);
}

/**
 * Chat prompts are counted over every message's text (no chat template: the stand-in has no tokenizer), and the
 * answer echoes the last user message, which is what a reader of the reply would look for.
 */
function parseMessages(fields: RequestFields, messages: unknown): PromptInput[] {
  if (messages === undefined) {
    fields.invalid({ type: 'missing', loc: ['messages'], msg: 'Field required', input: fields.body });
    return [];
  }
  if (!Array.isArray(messages)) {
    fields.invalid({ type: 'list_type', loc: ['messages'], msg: 'Input should be a valid list', input: messages });
    return [];
  }
  if (messages.length === 0) return [];
  let tokens = 0;
  let lastUserText: string | undefined;
  let allText = '';
  for (const [i, message] of messages.entries()) {
    if (message === null || typeof message !== 'object' || Array.isArray(message)) {
      fields.invalid({
        type: 'dict_type',
        loc: ['messages', i],
        msg: 'Input should be a valid dictionary',
        input: message,
      });
      continue;
    }
    const { role, content } = message as Record<string, unknown>;
    if (typeof role !== 'string') {
      fields.invalid({ type: 'missing', loc: ['messages', i, 'role'], msg: 'Field required', input: message });
      continue;
    }
    const text = contentText(fields, content, i);
    tokens += countTokens(text);
    allText = `${allText} ${text}`;
    if (role === 'user') lastUserText = text;
  }
  return [{ tokens, echo: lastUserText ?? allText }];
}

function contentText(fields: RequestFields, content: unknown, messageIndex: number): string {
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
  fields.invalid({
    type: 'string_type',
    loc: ['messages', messageIndex, 'content'],
    msg: 'Input should be a valid string',
    input: content,
  });
  return '';
}
