// A command that talks to Temporal: validate what can be validated offline, connect, run, map errors to exit codes.
// `client/cli.ts` imports this module only when such a command runs: it loads zod, YAML and the Temporal client.
import { NamespaceNotFoundError, type Client } from '@temporalio/client';
import { openWith } from '../connect.js';
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
  // Everything that needs no server is checked before anything waits on one: a bad document or Temporal profile is
  // reported (exit 2) whatever the server does. The connection is opened meanwhile, so that reading and checking a
  // document overlaps the connection's handshake instead of coming before it.
  const target = temporalTarget(command, io);
  const badInput = (err: unknown) => {
    if ('client' in target) void target.client.connection.close().catch(() => undefined);
    // An unreadable or invalid document, or a broken Temporal profile: all bad input.
    io.stderr.write(
      `${errorLines(err, 'file' in command ? (command.file === '-' ? 'stdin' : command.file) : undefined)}\n`,
    );
    return EXIT.usage;
  };
  let doc: unknown;
  try {
    if (command.kind === 'serve' || command.kind === 'update' || command.kind === 'apply') {
      doc = await readDocument({ io }, command.file);
      parseModelDocument(doc);
    }
  } catch (err) {
    return badInput(err);
  }
  if ('error' in target) return badInput(target.error);
  if ('connectError' in target) {
    io.stderr.write(`${errorLines(target.connectError)}\n`);
    return exitCodeOf(target.connectError);
  }
  const { settings, webUiUrl, client, verified } = target;
  const ctx: CliContext = { client, io, ...(webUiUrl ? { webUiUrl } : {}) };
  try {
    // The command's first call goes out beside the connection's check; a failed check ends the command (a server
    // that never answers would hold a call without a deadline), and explains a failed call better than the call.
    const outcome = run(ctx, command, doc);
    outcome.catch(() => undefined);
    return await Promise.race([outcome, verified.then(() => outcome)]);
  } catch (failure) {
    if (io.signal.aborted) {
      io.stderr.write('interrupted: stopped waiting (the model is not affected)\n');
      return EXIT.interrupted;
    }
    const err =
      failure instanceof ConnectError ? failure : ((await verified.then(noError, (e: unknown) => e)) ?? failure);
    if (err instanceof ConnectError) {
      io.stderr.write(`${errorLines(err)}\n`);
      return exitCodeOf(err);
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

const noError = (): undefined => undefined;

/** The Temporal settings of the command line and the environment, with the connection to them under way. */
function temporalTarget(
  command: ServerCommand,
  io: CliIO,
):
  | { settings: TemporalSettings; webUiUrl?: string; client: Client; verified: Promise<void> }
  | { settings: TemporalSettings; connectError: unknown }
  | { error: unknown } {
  let settings: TemporalSettings;
  let webUiUrl: string | undefined;
  try {
    const local = readLocalStackEnv(io.env, io.cwd).vars;
    settings = temporalSettingsFromEnv(io.env, command.temporal, local);
    webUiUrl = io.env.TEMPORAL_UI_URL || (io.env.TEMPORAL_ADDRESS ? undefined : local.TEMPORAL_UI_URL) || undefined;
  } catch (error) {
    return { error };
  }
  let opened: ReturnType<typeof openWith>;
  try {
    opened = openWith(settings, CONNECT_TIMEOUT_MS);
  } catch (connectError) {
    return { settings, connectError };
  }
  opened.verified.catch(() => undefined); // awaited once the input is known to be good
  return { settings, ...(webUiUrl ? { webUiUrl } : {}), ...opened };
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
