// The stand-in does no inference, so its "model" is a deterministic echo. Token counts use whitespace
// tokenization so tests and callers can predict usage numbers exactly; a real tokenizer would differ.

/** Every answer starts with this marker so nobody mistakes simulated output for a model's. */
const SIM_MARKER = '[ferry engine-sim]';

// Enough of the prompt to show the request arrived intact, short enough to keep responses small.
const ECHO_WORD_LIMIT = 16;

export type FinishReason = 'stop' | 'length';

export interface SyntheticAnswer {
  /** One entry per generated token (whitespace-separated word). */
  readonly words: readonly string[];
  readonly finishReason: FinishReason;
}

function splitWords(text: string): string[] {
  const trimmed = text.trim();
  return trimmed === '' ? [] : trimmed.split(/\s+/);
}

export function countTokens(text: string): number {
  return splitWords(text).length;
}

/**
 * The marker followed by the first words of `echoSource`, cut to `maxTokens` words. Like vLLM, the
 * finish reason is `length` when the token budget, not the answer, ended generation.
 */
export function synthesizeAnswer(echoSource: string, maxTokens: number): SyntheticAnswer {
  const full = [...splitWords(SIM_MARKER), ...splitWords(echoSource).slice(0, ECHO_WORD_LIMIT)];
  if (full.length > maxTokens) return { words: full.slice(0, maxTokens), finishReason: 'length' };
  return { words: full, finishReason: 'stop' };
}

export function answerText(answer: SyntheticAnswer): string {
  return answer.words.join(' ');
}

/** Stream deltas whose concatenation equals `answerText`, one per token. */
export function answerDeltas(answer: SyntheticAnswer): string[] {
  return answer.words.map((word, i) => (i === 0 ? word : ` ${word}`));
}
