// An engine's answers are not trusted to be short: each one the worker reads is cut off at a size, so that one engine
// (broken, or not vLLM at all) cannot take the worker and every other model down with it. An endless /health body
// once took the worker to 1.9 GB in 5 s; the time limits each caller sets end a slow answer, these end a large one.

/**
 * The most any one answer may be: vLLM's /health is empty and /v1/models lists a model and its adapters (about 300
 * bytes each, so 3,000 adapters fit).
 */
export const MAX_ANSWER_BYTES = 1024 * 1024;

/** An answer larger than its bound; the body was cancelled (the connection is released). */
export class AnswerTooLarge extends Error {
  override readonly name = 'AnswerTooLarge';
  constructor(readonly limit: number) {
    super(`the answer is larger than ${formatBytes(limit)}; it was cut off there`);
  }
}

/** The body as text, up to `limit` bytes; throws AnswerTooLarge (having cancelled the body) past it. */
export async function readAnswer(res: Response, limit = MAX_ANSWER_BYTES): Promise<string> {
  if (!res.body) return '';
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > limit) {
    await res.body.cancel().catch(() => undefined);
    throw new AnswerTooLarge(limit);
  }
  const decoder = new TextDecoder();
  let text = '';
  let bytes = 0;
  // Leaving the loop (by the throw) cancels the stream.
  for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
    bytes += chunk.byteLength;
    if (bytes > limit) throw new AnswerTooLarge(limit);
    text += decoder.decode(chunk, { stream: true });
  }
  return text + decoder.decode();
}

/** `readAnswer`, for an error message: at most `limit` bytes, a larger answer said to be so, never a throw. */
export async function answerForMessage(res: Response, limit = 4096): Promise<string> {
  return readAnswer(res, limit).catch((err: unknown) =>
    err instanceof AnswerTooLarge ? `(${err.message})` : '(the answer could not be read)',
  );
}

export function formatBytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${bytes / (1024 * 1024)} MiB` : `${bytes / 1024} KiB`;
}
