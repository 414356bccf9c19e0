// Structured logs: one JSON object per line, for the worker itself and (through the Runtime) for the SDK, the
// workflows and the activities. Values under secret-looking keys never reach a line. The SDK's DefaultLogger does the
// level filtering and the timestamps (its own clock, or the time the Runtime stamped on a forwarded SDK line); this
// file only turns each entry into a JSON line.
import type { LogLevel, LogMetadata } from '@temporalio/common';
import { DefaultLogger, type LogEntry } from '@temporalio/worker';

const SECRET_KEY = /(api[-_]?key|token|secret|password|passwd|authorization|credential|private[-_]?key)/i;
const REDACTED = '[redacted]';
const MAX_DEPTH = 6;

export class JsonLogger extends DefaultLogger {
  constructor(
    level: LogLevel = 'INFO',
    private readonly write: (line: string) => void = (line) => process.stdout.write(line),
    private readonly fields: LogMetadata = {},
  ) {
    super(level, (entry) => write(jsonLine(entry, fields)));
  }

  /** A logger that adds `fields` to every line. */
  child(fields: LogMetadata): JsonLogger {
    return new JsonLogger(this.level, this.write, { ...this.fields, ...fields });
  }
}

/** One log line: time, level and message first, then the logger's fields, then the entry's own metadata. */
function jsonLine({ timestampNanos, level, message, meta }: LogEntry, fields: LogMetadata): string {
  const time = new Date(Number(timestampNanos / 1_000_000n));
  const entry = { time: time.toISOString(), level: level.toLowerCase(), msg: message, ...fields, ...meta };
  return `${JSON.stringify(sanitize(entry, 0, new WeakSet()))}\n`;
}

/** JSON-safe copy: errors as objects, bigints as strings, cycles cut, secret-looking keys redacted. */
function sanitize(value: unknown, depth: number, seen: WeakSet<object>): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'function' || typeof value === 'symbol') return undefined;
  if (value === null || typeof value !== 'object') return value;
  if (seen.has(value)) return '[circular]';
  if (depth >= MAX_DEPTH) return '[…]';
  seen.add(value);
  if (value instanceof Error) {
    return sanitize(
      { name: value.name, message: value.message, stack: value.stack, cause: value.cause },
      depth + 1,
      seen,
    );
  }
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map((item) => sanitize(item, depth + 1, seen));
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (item === undefined) continue;
    out[key] = SECRET_KEY.test(key) ? REDACTED : sanitize(item, depth + 1, seen);
  }
  return out;
}
