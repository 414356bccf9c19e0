// The `ferry` command line: parse, answer --help and --version, hand every other command to `cli/run.ts`.
// Only the parser, the help texts and the exit codes load up front, so `ferry --version` and `--help` start in a
// fraction of a second (docs/performance.md#cli-start); zod, YAML and the Temporal client load when a command runs
// (compiled once into Node's compile cache: bin/ferry.js).
import { readFileSync } from 'node:fs';
import { parseCommand, sendsEarly, UsageError, type Command } from './cli/args.js';
import { EXIT } from './cli/exit-codes.js';
import { COMMAND_HELP, MAIN_HELP } from './cli/help.js';
import { processIO, terminalSafe, type CliIO } from './cli/io.js';

/** Runs one command line; resolves with the exit code. */
export async function runCli(argv: readonly string[], given: CliIO): Promise<number> {
  const io: CliIO = { ...given, stdout: terminalSafe(given.stdout), stderr: terminalSafe(given.stderr) };
  let command: Command;
  try {
    command = parseCommand(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(`error: ${err.message}\n\n${err.command ? COMMAND_HELP[err.command] : MAIN_HELP}`);
    return EXIT.usage;
  }
  if (command.kind === 'help') {
    io.stdout.write(command.topic ? COMMAND_HELP[command.topic] : MAIN_HELP);
    return EXIT.ok;
  }
  if (command.kind === 'version') {
    io.stdout.write(`ferry ${ferryVersion()}\n`);
    return EXIT.ok;
  }
  if (command.kind === 'completion') {
    io.stdout.write((await import('./cli/completion.js')).completionScript(command.shell));
    return EXIT.ok;
  }
  if (command.kind === 'explain') {
    // It reads the schema file beside the package; nothing of the commands' packages loads.
    const { explain } = await import('./cli/explain.js');
    try {
      io.stdout.write(explain(command.path));
      return EXIT.ok;
    } catch (err) {
      io.stderr.write(`error: ${(err as Error).message}\n`);
      return EXIT.usage;
    }
  }
  // `ferry update` and `ferry delete --cluster` send their update from the small prelude, before the commands and
  // the Temporal SDK load (client/early-update.ts). FERRY_CLI_EARLY=0 leaves it to the SDK (for comparison).
  const early = sendsEarly(command) && io.env.FERRY_CLI_EARLY !== '0';
  const prelude = early ? await import('./cli/prepare.js') : undefined;
  const prepared = prelude ? await prelude.prepareCommand(command, io) : undefined;
  // The SDK is needed only once the workflow has answered, and only to follow the update (a wait, an error);
  // loading it meanwhile would take the CPU from a server and worker on the same machine while they act on it (the
  // local stack on a laptop). So it loads after the answer, or after LOAD_SDK_AFTER_MS when the answer is slow (no
  // worker yet, a busy server), and not at all when the answer is all the command prints.
  if (prelude && prepared?.early) {
    const accepted = await within(prepared.early.answer, LOAD_SDK_AFTER_MS);
    const code = accepted && prelude.finishEarly(command, io, prepared, accepted);
    if (code !== undefined) return code;
  }
  const { runCommand } = await import('./cli/run.js');
  return runCommand(command, io, prepared);
}

/** How long the update sent early may keep the SDK from loading. */
const LOAD_SDK_AFTER_MS = 1_000;

/** What `promise` resolves with, or `undefined` when that takes longer than `ms`. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The version in Ferry's package.json, at the package root: `../package.json` from the sources (`client/cli.ts`),
 * `../../package.json` from the build (`dist/client/cli.js`, also in an installed package).
 */
function ferryVersion(): string {
  for (const path of ['../package.json', '../../package.json']) {
    let text: string;
    try {
      text = readFileSync(new URL(path, import.meta.url), 'utf8');
    } catch {
      continue;
    }
    const { version } = JSON.parse(text) as { version?: unknown };
    if (typeof version === 'string') return version;
  }
  throw new Error(`no package.json with a version above ${import.meta.url}`);
}

/** The process entry (`bin/ferry.js`): Ctrl-C stops a wait; a second Ctrl-C exits at once. */
export async function main(argv: readonly string[] = process.argv.slice(2)): Promise<void> {
  const interrupt = new AbortController();
  // A reader that stopped reading (`ferry diff | head`): end at once and quietly, as Unix tools do, not with a stack.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    process.exit(EXIT.brokenPipe);
  });
  process.on('SIGINT', () => {
    if (interrupt.signal.aborted) process.exit(EXIT.interrupted);
    interrupt.abort(new Error('interrupted'));
  });
  const code = await runCli(argv, processIO(interrupt.signal));
  // Exits as soon as the output is written. The Temporal client retries a call that failed while Temporal was away
  // after a pause, in a timer of its own; one still pending when the command has closed the connection would throw
  // from that timer ("Channel has been shut down") and turn a finished command into a crash.
  await Promise.all([process.stdout, process.stderr].map((s) => new Promise((resolve) => s.write('', resolve))));
  process.exit(code);
}
