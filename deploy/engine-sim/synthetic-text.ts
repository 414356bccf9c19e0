// The stand-in does no inference, so its "model" is a deterministic echo. Token counts use whitespace
// tokenization so tests and callers can predict usage numbers exactly; a real tokenizer would differ.

/** Every answer starts with this marker so nobody mistakes simulated output for a model's. */
const SIM_MARKER = '[ferry engine-sim]';

// Enough of the prompt to show the request arrived intact, short enough to keep responses small.
const ECHO_WORD_LIMIT = 16;

// What an answer is padded with when `min_tokens` or `ignore_eos` asks for more than the echo: fixed, repeated, and
// saying what it is, so a long answer is as predictable and as obviously synthetic as a short one.
const FILLER_WORDS = splitWords('synthetic filler from the engine stand-in, not a model.');

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
 * The marker followed by the first words of `echoSource`, padded with filler to at least `minTokens` words and cut to
 * `maxTokens`. Like vLLM, the finish reason is `length` when the token budget, not the answer, ended generation:
 * either the echo was longer than the budget or `minTokens` (what `ignore_eos` amounts to when it equals the budget)
 * kept the answer going until the budget stopped it.
 */
export function synthesizeAnswer(echoSource: string, maxTokens: number, minTokens = 0): SyntheticAnswer {
  const natural = [...splitWords(SIM_MARKER), ...splitWords(echoSource).slice(0, ECHO_WORD_LIMIT)];
  if (natural.length > maxTokens || minTokens >= maxTokens) {
    return { words: fitTo(natural, maxTokens), finishReason: 'length' };
  }
  return { words: fitTo(natural, Math.max(natural.length, minTokens)), finishReason: 'stop' };
}

/** `words` cut, or padded with filler, to exactly `length` words. */
function fitTo(words: readonly string[], length: number): string[] {
  const fitted = words.slice(0, length);
  for (let i = 0; fitted.length < length; i += 1) fitted.push(FILLER_WORDS[i % FILLER_WORDS.length] as string);
  return fitted;
}

export function answerText(answer: SyntheticAnswer): string {
  return answer.words.join(' ');
}

/** Stream deltas whose concatenation equals `answerText`, one per token. */
export function answerDeltas(answer: SyntheticAnswer): string[] {
  return answer.words.map((word, i) => (i === 0 ? word : ` ${word}`));
}

/**
 * Token ids for `text`, one per whitespace word as everywhere in the stand-in: a stable hash of the word into the
 * vocabulary, clear of the first ids (special tokens in most tokenizers), so the same word always has the same id.
 */
export function tokenIds(text: string, vocabSize: number): number[] {
  const reserved = Math.min(3, vocabSize - 1);
  return splitWords(text).map((word) => {
    let hash = 0x811c9dc5;
    for (const byte of Buffer.from(word, 'utf8')) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
    return reserved + (hash % (vocabSize - reserved));
  });
}
