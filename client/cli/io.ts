// What the CLI touches of the outside world, passed in so tests can capture it.
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
