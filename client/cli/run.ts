// A command that talks to Temporal: validate what can be validated offline, connect, run, map errors to exit codes.
// `client/cli.ts` imports this module only when such a command runs: it loads zod, YAML and the Temporal client.
import { NamespaceNotFoundError, type Client } from '@temporalio/client';
import { connectWith } from '../connect.js';
import { parseModelDocument } from '../document.js';
import {
  ConnectError,
  InvalidSpecError,
  ModelFailedError,
  ModelNotFoundError,
  NoWorkerError,
  SpecConflictError,
  WaitTimeoutError,
} from '../errors.js';
import { readLocalStackEnv } from '../local-stack.js';
import { isUnavailable } from '../model-status.js';
import { temporalSettingsFromEnv, type TemporalSettings } from '../temporal-env.js';
import { type Command, UsageError } from './args.js';
import { type CliContext, readDocument } from './context.js';
import { EXIT } from './exit-codes.js';
import { errorLines } from './format.js';
import type { CliIO } from './io.js';

/** How long to wait for Temporal to answer before exit code 5. */
const CONNECT_TIMEOUT_MS = 5_000;

type ServerCommand = Exclude<Command, { kind: 'help' | 'version' }>;

/** Runs a parsed command; resolves with the exit code. */
export async function runCommand(command: ServerCommand, io: CliIO): Promise<number> {
  // Everything that needs no server is checked first: a bad document never waits for a connection.
  let doc: unknown;
  let settings: TemporalSettings;
  let webUiUrl: string | undefined;
  try {
    if (command.kind === 'serve' || command.kind === 'update' || command.kind === 'apply') {
      doc = await readDocument({ io }, command.file);
      parseModelDocument(doc);
    }
    const local = readLocalStackEnv(io.env, io.cwd).vars;
    settings = temporalSettingsFromEnv(io.env, command.temporal, local);
    webUiUrl = io.env.TEMPORAL_UI_URL || (io.env.TEMPORAL_ADDRESS ? undefined : local.TEMPORAL_UI_URL) || undefined;
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
  const ctx: CliContext = { client, io, ...(webUiUrl ? { webUiUrl } : {}) };
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
    // A namespace that does not exist is a connection problem (exit 5), not a model that failed.
    if (err instanceof NamespaceNotFoundError) {
      io.stderr.write(
        `error: Temporal at ${settings.address} has no namespace ${JSON.stringify(settings.namespace)}; ` +
          'check TEMPORAL_NAMESPACE, --temporal-namespace or the temporal.toml profile\n',
      );
      return EXIT.unavailable;
    }
    io.stderr.write(`${errorLines(err)}\n`);
    return exitCodeOf(err);
  } finally {
    await client.connection.close();
  }
}

/** Each command's module is loaded when it runs. */
async function run(ctx: CliContext, command: ServerCommand, doc: unknown): Promise<number> {
  switch (command.kind) {
    case 'serve':
      return (await import('./serve.js')).serveCommand(ctx, command, doc);
    case 'update':
      return (await import('./serve.js')).updateCommand(ctx, command, doc);
    case 'apply':
      return (await import('./serve.js')).applyCommand(ctx, command, doc);
    case 'status':
      return (await import('./status.js')).statusCommand(ctx, command);
    case 'list':
      return (await import('./status.js')).listCommand(ctx, command);
    case 'delete':
      return (await import('./delete.js')).deleteCommand(ctx, command);
    case 'watch':
      return (await import('./watch.js')).watchCommand(ctx, command);
  }
}

/** The exit code for an error (the codes are in exit-codes.ts). */
function exitCodeOf(err: unknown): number {
  if (err instanceof UsageError || err instanceof InvalidSpecError || err instanceof SpecConflictError)
    return EXIT.usage;
  if (err instanceof ModelNotFoundError) return EXIT.notFound;
  if (err instanceof WaitTimeoutError) return EXIT.timeout;
  if (err instanceof ConnectError || err instanceof NoWorkerError || isUnavailable(err)) return EXIT.unavailable;
  if (err instanceof ModelFailedError) return EXIT.failed;
  return EXIT.failed;
}
