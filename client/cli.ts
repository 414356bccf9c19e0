// The `ferry` command line: parse, validate what can be validated offline, connect, run, map errors to exit codes.
import type { Client } from '@temporalio/client';
import { parseCommand, UsageError, type Command } from './cli/args.js';
import { type CliContext, readDocument } from './cli/context.js';
import { deleteCommand } from './cli/delete.js';
import { EXIT, exitCodeOf } from './cli/exit-codes.js';
import { errorLines } from './cli/format.js';
import { COMMAND_HELP, MAIN_HELP } from './cli/help.js';
import { processIO, type CliIO } from './cli/io.js';
import { applyCommand, serveCommand, updateCommand } from './cli/serve.js';
import { listCommand, statusCommand } from './cli/status.js';
import { watchCommand } from './cli/watch.js';
import { connectWith } from './connect.js';
import { parseModelDocument } from './document.js';
import { readLocalStackEnv } from './local-stack.js';
import { isUnavailable } from './model-status.js';
import { temporalSettingsFromEnv, type TemporalSettings } from './temporal-env.js';

/** How long to wait for Temporal to answer before exit code 5. */
const CONNECT_TIMEOUT_MS = 5_000;

/** Runs one command line; resolves with the exit code. */
export async function runCli(argv: readonly string[], io: CliIO): Promise<number> {
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

  // Everything that needs no server is checked first: a bad document never waits for a connection.
  let doc: unknown;
  let settings: TemporalSettings;
  try {
    if (command.kind === 'serve' || command.kind === 'update' || command.kind === 'apply') {
      doc = await readDocument({ io }, command.file);
      parseModelDocument(doc);
    }
    settings = temporalSettingsFromEnv(io.env, command.temporal, readLocalStackEnv(io.env, io.cwd).vars);
  } catch (err) {
    // An unreadable or invalid document, or a broken Temporal profile: all bad input.
    io.stderr.write(
      `${errorLines(err, 'file' in command ? (command.file === '-' ? 'stdin' : command.file) : undefined)}\n`,
    );
    return EXIT.usage;
  }

  let client: Client;
  try {
    client = await connectWith(settings, CONNECT_TIMEOUT_MS);
  } catch (err) {
    io.stderr.write(`${errorLines(err)}\n`);
    return exitCodeOf(err);
  }
  const ctx: CliContext = { client, io };
  try {
    return await run(ctx, command, doc);
  } catch (err) {
    if (io.signal.aborted) {
      io.stderr.write('interrupted: stopped waiting (the model is not affected)\n');
      return EXIT.interrupted;
    }
    if (isUnavailable(err)) {
      io.stderr.write(`error: lost the connection to Temporal at ${settings.address}\n`);
      return EXIT.unavailable;
    }
    io.stderr.write(`${errorLines(err)}\n`);
    return exitCodeOf(err);
  } finally {
    await client.connection.close();
  }
}

function run(ctx: CliContext, command: Exclude<Command, { kind: 'help' }>, doc: unknown): Promise<number> {
  switch (command.kind) {
    case 'serve':
      return serveCommand(ctx, command, doc);
    case 'update':
      return updateCommand(ctx, command, doc);
    case 'apply':
      return applyCommand(ctx, command, doc);
    case 'status':
      return statusCommand(ctx, command);
    case 'list':
      return listCommand(ctx, command);
    case 'delete':
      return deleteCommand(ctx, command);
    case 'watch':
      return watchCommand(ctx, command);
  }
}

/** The process entry (`bin/ferry.js`): Ctrl-C stops a wait; a second Ctrl-C exits at once. */
export async function main(argv: readonly string[] = process.argv.slice(2)): Promise<void> {
  const interrupt = new AbortController();
  process.on('SIGINT', () => {
    if (interrupt.signal.aborted) process.exit(EXIT.interrupted);
    interrupt.abort(new Error('interrupted'));
  });
  process.exitCode = await runCli(argv, processIO(interrupt.signal));
}
