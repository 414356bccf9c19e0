// The model's own token ids for the measurement's prompts. The prober sends token-id prompts of an exact length; ids
// chosen blindly (1000–9999) are out of a small vocabulary, and vLLM refuses such a prompt ("Token id 8232 is out of
// vocabulary", found with the local stack's tiny model, 541 tokens). vLLM's /tokenize of an ordinary text gives ids
// every request can use.
import type { ProbeTarget } from './request.js';

/** Ordinary words, so the ids are ordinary text tokens, not bytes or special tokens. */
const TEXT =
  'The model serves answers to many people every day, and the engine keeps its queue short while the workers ' +
  'pull new weights from the hub and roll them out across the cluster without dropping a single request. ' +
  'Select the rows from the table where the value is greater than one, then order them by name and date.';
/** Fewer distinct ids than this and the prompts would repeat too soon to keep vLLM's prefix cache out of it. */
const MIN_IDS = 16;
/** An answer to /tokenize of TEXT is a few hundred bytes; anything much longer is not one. */
const MAX_BODY_BYTES = 64 * 1024;

/** The distinct ids of TEXT in the engine's tokenizer, or undefined when it cannot tell (no /tokenize, an error). */
export async function vocabularyIds(target: ProbeTarget, signal?: AbortSignal): Promise<number[] | undefined> {
  try {
    const res = await (target.fetch ?? fetch)(`${target.url.replace(/\/+$/, '')}/tokenize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...target.headers },
      body: JSON.stringify({ model: target.model, prompt: TEXT, add_special_tokens: false }),
      signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(10_000)]) : AbortSignal.timeout(10_000),
    });
    if (!res.ok || !res.body) {
      await res.body?.cancel();
      return undefined;
    }
    let text = '';
    const decoder = new TextDecoder();
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      if (text.length > MAX_BODY_BYTES) return undefined;
    }
    const tokens: unknown = (JSON.parse(text) as { tokens?: unknown }).tokens;
    if (!Array.isArray(tokens)) return undefined;
    const ids = [...new Set(tokens.filter((t): t is number => Number.isSafeInteger(t) && t >= 0))];
    return ids.length >= MIN_IDS ? ids : undefined;
  } catch {
    return undefined;
  }
}
