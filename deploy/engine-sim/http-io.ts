// Request/response plumbing shared by the routes, kept apart so handlers read as vLLM's behaviour only.
import type { IncomingMessage, ServerResponse } from 'node:http';

// vLLM has no body limit of its own; this only keeps a runaway client from exhausting the stand-in's memory.
const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** An error that maps onto vLLM's OpenAI error body: `{"error":{"message","type","param","code"}}`. */
export class OpenAiHttpError extends Error {
  readonly headers: Record<string, string>;
  /** vLLM names the request field at fault (`model`, `max_tokens`, `body.stream`…), or null. */
  readonly param: string | null;

  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    extra: { headers?: Record<string, string>; param?: string | null } = {},
  ) {
    super(message);
    this.name = 'OpenAiHttpError';
    this.headers = extra.headers ?? {};
    this.param = extra.param ?? null;
  }
}

/**
 * vLLM 0.32's VLLMValidationError: 400 `BadRequestError` whose message ends with the parameter (and its value when
 * it has one) and whose `param` names it, e.g. `max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)`.
 */
export function invalidParameter(message: string, parameter: string, value?: number | string): OpenAiHttpError {
  const suffix = value === undefined ? `(parameter=${parameter})` : `(parameter=${parameter}, value=${value})`;
  return new OpenAiHttpError(400, 'BadRequestError', `${message} ${suffix}`, { param: parameter });
}

/** One pydantic validation error as FastAPI reports it: `loc` without the `body` root, which is added. */
export interface FieldError {
  readonly type: string;
  readonly loc: readonly (string | number)[];
  readonly msg: string;
  readonly input: unknown;
  readonly ctx?: Record<string, string>;
}

/**
 * FastAPI's request-validation failure as vLLM 0.32 renders it: 400, type `Bad Request` (HTTP's own phrase), the
 * errors one a line in Python's repr, and `param` the first error's location (`body.max_tokens`).
 */
export function validationError(errors: readonly FieldError[]): OpenAiHttpError {
  const label = errors.length === 1 ? 'error' : 'errors';
  const lines = errors.map((err) => {
    const entries: [string, unknown][] = [
      ['type', err.type],
      ['loc', ['body', ...err.loc].join('.')],
      ['msg', err.msg],
      ['input', summarizeInput(err.input)],
    ];
    if (err.ctx) entries.push(['ctx', err.ctx]);
    return `  ${pyRepr(Object.fromEntries(entries))}`;
  });
  const first = errors[0];
  return new OpenAiHttpError(400, 'Bad Request', `${errors.length} validation ${label}:\n${lines.join('\n')}`, {
    param: first ? ['body', ...first.loc].join('.') : null,
  });
}

/** A validation failure that is no field's (vLLM's wording for a media type it refuses). */
function bareValidationError(text: string): OpenAiHttpError {
  return new OpenAiHttpError(400, 'Bad Request', `1 validation error:\n  ${text}`);
}

/** vLLM shows an input by its text, and a container by its size (`<list of 2 items>`). */
function summarizeInput(value: unknown): string {
  if (value === undefined || value === null) return 'None';
  if (Array.isArray(value)) return `<list of ${value.length} items>`;
  if (typeof value === 'object') return `<dict of ${Object.keys(value).length} items>`;
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 200)}...[truncated]` : text;
}

/** Python's repr of a str or a dict of them, which is how vLLM prints validation errors. */
function pyRepr(value: unknown): string {
  if (typeof value === 'string') {
    const quote = value.includes("'") && !value.includes('"') ? '"' : "'";
    const escaped = value
      .replace(/\\/g, '\\\\')
      .replace(/\n/g, '\\n')
      .replace(/\r/g, '\\r')
      .replace(/\t/g, '\\t')
      .split(quote)
      .join(`\\${quote}`);
    return `${quote}${escaped}${quote}`;
  }
  if (value && typeof value === 'object') {
    return `{${Object.entries(value)
      .map(([k, v]) => `${pyRepr(k)}: ${pyRepr(v)}`)
      .join(', ')}}`;
  }
  return String(value);
}

/**
 * vLLM's `sanitize_message`: error messages lose memory addresses and file paths under the usual system roots (and
 * any path ending in a file name), which become `<path>`. A path under `/models` (the engine's volume) survives.
 */
function sanitizeMessage(message: string): string {
  return message
    .replace(/ at 0x[0-9a-fA-F]+>/g, '>')
    .replace(/\/(?:home|usr|opt|var|tmp|root|lib|mnt|srv)(?:\/[\w.-]+)+/g, '<path>')
    .replace(/(?:\/[\w-]+)+\/[\w-]+\.\w+/g, '<path>')
    .trim();
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

/** A text body; `contentType` null sends none, as Starlette's bare `Response(content=str)` does. */
export function sendText(
  res: ServerResponse,
  status: number,
  text: string,
  contentType: string | null = 'text/plain; charset=utf-8',
) {
  res.writeHead(status, {
    ...(contentType ? { 'content-type': contentType } : {}),
    'content-length': String(Buffer.byteLength(text)),
  });
  res.end(text);
}

export function sendOpenAiError(res: ServerResponse, error: OpenAiHttpError) {
  sendJson(res, error.status, openAiErrorBody(error), error.headers);
}

function openAiErrorBody(error: OpenAiHttpError) {
  return {
    error: { message: sanitizeMessage(error.message), type: error.type, param: error.param, code: error.status },
  };
}

/** Starlette's shape for unrouted paths and wrong methods (with `allow`), which is what vLLM answers there too. */
export function sendDetail(res: ServerResponse, status: number, detail: string, headers: Record<string, string> = {}) {
  sendJson(res, status, { detail }, headers);
}

/**
 * Reads a JSON object body. vLLM rejects any media type other than application/json before parsing, so clients
 * that forget the header fail here the same way they would against the real engine.
 */
export async function readJsonObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const mediaType = (req.headers['content-type'] ?? '').split(';', 1)[0]?.trim().toLowerCase();
  if (mediaType !== 'application/json') {
    await drain(req);
    throw bareValidationError("Unsupported Media Type: Only 'application/json' is allowed");
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > MAX_BODY_BYTES) throw new OpenAiHttpError(413, 'Payload Too Large', 'Request body is too large.');
    chunks.push(buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') throw validationError([{ type: 'missing', loc: [], msg: 'Field required', input: null }]);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw jsonDecodeError(text, (err as Error).message);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw validationError([
      {
        type: 'model_attributes_type',
        loc: [],
        msg: 'Input should be a valid dictionary or object to extract fields from',
        input: parsed,
      },
    ]);
  }
  return parsed as Record<string, unknown>;
}

/** FastAPI's `json_invalid` error: the offset where Python's decoder stopped, and its words for why. */
function jsonDecodeError(text: string, nodeMessage: string): OpenAiHttpError {
  const position = /at position (\d+)/.exec(nodeMessage)?.[1] ?? String(text.length);
  const reasons: [RegExp, string][] = [
    [/double-quoted property name/, 'Expecting property name enclosed in double quotes'],
    [/Expected ':'/, "Expecting ':' delimiter"],
    [/Expected ',' or '}'/, "Expecting ',' delimiter"],
    [/Expected ',' or ']'/, "Expecting ',' delimiter"],
    [/non-whitespace character after JSON/, 'Extra data'],
  ];
  const reason = reasons.find(([pattern]) => pattern.test(nodeMessage))?.[1] ?? 'Expecting value';
  return validationError([
    { type: 'json_invalid', loc: [Number(position)], msg: 'JSON decode error', input: {}, ctx: { error: reason } },
  ]);
}

async function drain(req: IncomingMessage) {
  for await (const _ of req) {
    // Consume the body so the keep-alive connection stays usable for the next request.
  }
}
