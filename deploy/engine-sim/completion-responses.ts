// The bodies vLLM 0.32 answers a completion or chat request with, field for field: the whole response, or server-sent
// events one token per chunk as the scheduler produces them, and an error reported inside a stream.
import type { ServerResponse } from 'node:http';
import { sendJson, type OpenAiHttpError } from './http-io.js';
import { answerDeltas, answerText, type FinishReason, type SyntheticAnswer } from './synthetic-text.js';

export type Kind = 'completion' | 'chat';

export interface Choice {
  readonly index: number;
  readonly answer: SyntheticAnswer;
}

export interface Usage {
  readonly prompt_tokens: number;
  readonly total_tokens: number;
  readonly completion_tokens: number;
}

/** Runs the request's sequence, calling `onToken(step)` as each decode step's tokens are due. */
export type Generate = (onToken: (step: number) => void) => Promise<void>;

/** An error vLLM reports inside a stream: Python's json.dumps of the error body (its spacing), then [DONE]. */
export function streamError(res: ServerResponse, error: OpenAiHttpError) {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
  const body =
    `{"error": {"message": ${JSON.stringify(error.message)}, "type": ${JSON.stringify(error.type)}, ` +
    `"param": ${JSON.stringify(error.param)}, "code": ${error.status}}}`;
  res.end(`data: ${body}\n\ndata: [DONE]\n\n`);
}

export interface Envelope {
  readonly id: string;
  readonly object: string;
  readonly created: number;
  readonly model: string;
}

/** vLLM 0.32's response bodies, field for field (every field it sends, null where the stand-in has nothing). */
export function respondWithChoices(
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

export interface StreamShape {
  readonly includeUsage: boolean;
  readonly fingerprint: string;
}

/**
 * Server-sent events as vLLM 0.32 sends them: one token per chunk, sent as the scheduler produces it (choices
 * interleaved, one token each per step), finish_reason on each choice's last, then `[DONE]`. The fingerprint rides on
 * the last message: each finishing chunk, or the usage chunk when there is one.
 */
export async function streamChoices(
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
