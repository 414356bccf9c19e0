// What the CLI touches of the outside world, passed in so tests can capture it.
import { printable } from '../../workflows/contract/spec/text.js';
import type { Env } from '../temporal-env.js';

export interface Output {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface CliIO {
  stdout: Output;
  stderr: Output;
  /** Read for `-f -`. */
  stdin: AsyncIterable<string | Buffer>;
  env: Env;
  cwd: string;
  now: () => Date;
  /** Aborted on Ctrl-C: waits stop, the command exits 130. */
  signal: AbortSignal;
}

/** A command's result for programs (`--output json`). */
export function printJson(ctx: { io: CliIO }, value: unknown): void {
  ctx.io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function processIO(signal: AbortSignal): CliIO {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    cwd: process.cwd(),
    now: () => new Date(),
    signal,
  };
}

/** The status printer's own sequence: back to the line's start, and clear it (status-printer.ts). */
export const CLEAR_LINE = '\r\x1b[2K';

/**
 * `out`, writing every control character (C0 but newline and tab, DEL, C1), bidirectional override and lone surrogate as
 * `\uXXXX`: what a model's status carries comes from engines, pods and puller logs, and an escape sequence in it must
 * not reach a terminal. In JSON output such a character is inside a string, where `\uXXXX` means the same.
 */
export function terminalSafe(out: Output): Output {
  return { isTTY: out.isTTY, write: (text: string) => out.write(safeText(text)) };
}

export function safeText(text: string): string {
  return text
    .split(CLEAR_LINE)
    .map((part) =>
      part
        .split(/([\n\t])/)
        .map((piece) => (piece === '\n' || piece === '\t' ? piece : printable(piece)))
        .join(''),
    )
    .join(CLEAR_LINE);
}
