// Structured logs: one JSON object per line, for the worker itself and (through the Runtime) for the SDK, the
// workflows and the activities. Values under secret-looking keys never reach a line.
import { LogTimestamp, type LogLevel, type LogMetadata, type Logger } from '@temporalio/worker';

const ORDER: Record<LogLevel, number> = { TRACE: 0, DEBUG: 1, INFO: 2, WARN: 3, ERROR: 4 };
const SECRET_KEY = /(api[-_]?key|token|secret|password|passwd|authorization|credential|private[-_]?key)/i;
const REDACTED = '[redacted]';
const MAX_DEPTH = 6;

export class JsonLogger implements Logger {
  constructor(
    private readonly level: LogLevel = 'INFO',
    private readonly write: (line: string) => void = (line) => process.stdout.write(line),
    private readonly fields: LogMetadata = {},
  ) {}

  /** A logger that adds `fields` to every line. */
  child(fields: LogMetadata): JsonLogger {
    return new JsonLogger(this.level, this.write, { ...this.fields, ...fields });
  }

  log(level: LogLevel, message: string, meta: LogMetadata = {}): void {
    if (ORDER[level] < ORDER[this.level]) return;
    // The Runtime stamps forwarded SDK lines with their own time in nanoseconds.
    const stamp = meta[LogTimestamp] as bigint | undefined;
    const time = stamp !== undefined ? new Date(Number(stamp / 1_000_000n)) : new Date();
    const entry = { time: time.toISOString(), level: level.toLowerCase(), msg: message, ...this.fields, ...meta };
    this.write(`${JSON.stringify(sanitize(entry, 0, new WeakSet()))}\n`);
  }

  trace(message: string, meta?: LogMetadata): void {
    this.log('TRACE', message, meta);
  }
  debug(message: string, meta?: LogMetadata): void {
    this.log('DEBUG', message, meta);
  }
  info(message: string, meta?: LogMetadata): void {
    this.log('INFO', message, meta);
  }
  warn(message: string, meta?: LogMetadata): void {
    this.log('WARN', message, meta);
  }
  error(message: string, meta?: LogMetadata): void {
    this.log('ERROR', message, meta);
  }
}

/** JSON-safe copy: errors as objects, bigints as strings, cycles cut, secret-looking keys redacted. */
export function sanitize(value: unknown, depth: number, seen: WeakSet<object>): unknown {
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
