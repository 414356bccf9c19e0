// The `ferry` command line: parse, answer --help and --version, hand every other command to `cli/run.ts`.
// Only the parser, the help texts and the exit codes load up front, so `ferry --version` and `--help` start in a
// fraction of a second (docs/performance.md#cli-start); zod, YAML and the Temporal client load when a command runs
// (compiled once into Node's compile cache: bin/ferry.js).
import { readFileSync } from 'node:fs';
import { parseCommand, UsageError, type Command } from './cli/args.js';
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
  const { runCommand } = await import('./cli/run.js');
  return runCommand(command, io);
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
