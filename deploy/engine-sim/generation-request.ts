// What a completion or chat request asks for, read as vLLM 0.32's pydantic models read it: the prompts (text, token
// ids or chat messages, counted in whitespace tokens), the token limits and the sampling and streaming fields.
import { invalidParameter } from './http-io.js';
import { RequestFields } from './request-fields.js';
import { countTokens } from './synthetic-text.js';

export interface PromptInput {
  readonly tokens: number;
  /** Text the synthetic answer echoes; empty for token-id prompts, which the stand-in cannot detokenize. */
  readonly echo: string;
  /** A token-id prompt's ids, checked against the vocabulary. */
  readonly ids?: readonly number[];
}

export interface GenerationRequest {
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

// Fields are read in the order vLLM's pydantic models declare them, which is the order their errors are listed in.
export function parseCompletionRequest(body: Record<string, unknown>): GenerationRequest {
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

export function parseChatRequest(body: Record<string, unknown>): GenerationRequest {
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
