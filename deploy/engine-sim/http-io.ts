// Request/response plumbing shared by the routes, kept apart so handlers read as vLLM's behaviour only.
import type { IncomingMessage, ServerResponse } from 'node:http';

// vLLM has no body limit of its own; this only keeps a runaway client from exhausting the stand-in's memory.
const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** An error that maps onto vLLM's OpenAI error body: `{"error":{"message","type","param","code"}}`. */
export class OpenAiHttpError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'OpenAiHttpError';
  }
}

/** vLLM reports request-validation failures (bad JSON, wrong field types) with HTTP's own phrase as the type. */
export function badRequest(message: string): OpenAiHttpError {
  return new OpenAiHttpError(400, 'Bad Request', message);
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}

export function sendText(res: ServerResponse, status: number, text: string, contentType = 'text/plain; charset=utf-8') {
  res.writeHead(status, { 'content-type': contentType, 'content-length': String(Buffer.byteLength(text)) });
  res.end(text);
}

export function sendOpenAiError(res: ServerResponse, error: OpenAiHttpError) {
  sendJson(
    res,
    error.status,
    { error: { message: error.message, type: error.type, param: null, code: error.status } },
    error.headers,
  );
}

/** Starlette's shape for unrouted paths, which is what vLLM answers there too. */
export function sendDetail(res: ServerResponse, status: number, detail: string) {
  sendJson(res, status, { detail });
}

/**
 * Reads a JSON object body. vLLM rejects any media type other than application/json before parsing, so clients
 * that forget the header fail here the same way they would against the real engine.
 */
export async function readJsonObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const mediaType = (req.headers['content-type'] ?? '').split(';', 1)[0]?.trim().toLowerCase();
  if (mediaType !== 'application/json') {
    await drain(req);
    throw badRequest("Unsupported Media Type: Only 'application/json' is allowed");
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > MAX_BODY_BYTES) throw new OpenAiHttpError(413, 'Payload Too Large', 'Request body is too large.');
    chunks.push(buffer);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw badRequest(`JSON decode error: ${(err as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw badRequest('Input should be a valid dictionary or object to extract fields from');
  }
  return parsed as Record<string, unknown>;
}

async function drain(req: IncomingMessage) {
  for await (const _ of req) {
    // Consume the body so the keep-alive connection stays usable for the next request.
  }
}
