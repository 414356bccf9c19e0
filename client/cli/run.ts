// A command that talks to Temporal: validate what can be validated offline, connect, run, map errors to exit codes.
// `client/cli.ts` imports this module only when such a command runs: it loads zod, YAML and the Temporal client.
import { NamespaceNotFoundError, type Client } from '@temporalio/client';
import { connectError, notTemporal, openWith } from '../connect.js';
import { ConnectError } from '../errors.js';
import { isUnavailable } from '../model-status.js';
import type { TemporalSettings } from '../temporal-env.js';
import type { CliContext } from './context.js';
import { EXIT } from './exit-codes.js';
import { exitCodeOf } from './exit-of.js';
import { errorLines, inputErrorLines } from './format.js';
import type { CliIO } from './io.js';
import { inputOf, type Prepared, type ServerCommand, targetOf } from './prepare.js';
import type { ModelDocument } from './read-document.js';
import { boundRequests, type RequestBound, RequestTimeoutError, withoutRequestTimeout } from './request-timeout.js';

/** How long to wait for Temporal to answer before exit code 5 (a refused connection ends at once). */
const CONNECT_TIMEOUT_MS = 2_000;

/**
 * Runs a parsed command; resolves with the exit code. `prepared` is what `prepareCommand` read (and sent) before
 * this module loaded; without it, the settings are read here, and the document while the connection opens.
 */
export async function runCommand(command: ServerCommand, io: CliIO, prepared?: Prepared): Promise<number> {
  // A client-side dry run connects to nothing.
  if ('dryRun' in command && command.dryRun === 'client') {
    return (await import('./dry-run.js')).dryRunCommand(command, io);
  }
  // Everything that needs no server is checked before anything waits on one: a bad document or Temporal profile is
  // reported (exit 2) whatever the server does.
  const target = prepared?.target ?? targetOf(command, io);
  const bound = command.requestTimeoutMs ? boundRequests(command.requestTimeoutMs) : undefined;
  const connection = 'settings' in target ? open(target.settings, command.requestTimeoutMs, bound) : undefined;
  const input = prepared?.input ?? (await inputOf(command, io));
  const badInput = (err: unknown) => {
    prepared?.early?.close();
    if (connection && 'client' in connection) void connection.client.connection.close().catch(() => undefined);
    // Unreadable or invalid documents, or a broken Temporal profile: all bad input.
    io.stderr.write(`${inputErrorLines(err)}\n`);
    return EXIT.usage;
  };
  if ('error' in input) return badInput(input.error);
  if ('error' in target) return badInput(target.error);
  if (!connection || 'connectError' in connection) {
    prepared?.early?.close();
    io.stderr.write(`${errorLines(connection?.connectError)}\n`);
    return exitCodeOf(connection?.connectError);
  }
  const { settings, webUiUrl } = target;
  const { client, verified } = connection;
  const early = prepared?.early;
  const ctx: CliContext = {
    client,
    io,
    ...(webUiUrl ? { webUiUrl } : {}),
    ...(early ? { early } : {}),
    ...(bound ? { requestTimedOut: bound.timedOut } : {}),
  };
  try {
    // The command's first call goes out beside the connection's check; a failed check ends the command (a server
    // that never answers would hold a call without a deadline), and explains a failed call better than the call.
    const outcome = run(ctx, command, input.docs ?? []);
    outcome.catch(() => undefined);
    return await Promise.race([outcome, verified.then(() => outcome)]);
  } catch (failure) {
    if (io.signal.aborted) {
      io.stderr.write('interrupted: stopped waiting (the model is not affected)\n');
      return EXIT.interrupted;
    }
    const found =
      failure instanceof ConnectError ? failure : ((await verified.then(noError, (e: unknown) => e)) ?? failure);
    // A server that speaks HTTP/2 but not Temporal's API passes the connection's check and fails the first call.
    const notFrontend = !(found instanceof ConnectError) && notTemporal(found);
    // A request that ran out of --request-timeout: whatever the command made of it (a query without an answer
    // looks like a missing worker), the request is what went wrong.
    const late = bound?.timedOut();
    const err = notFrontend
      ? connectError(settings, found)
      : late && !(found instanceof RequestTimeoutError) && !(found instanceof ConnectError)
        ? new RequestTimeoutError(late, command.requestTimeoutMs!, settings.address)
        : found;
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
    const code = exitCodeOf(err);
    // diff exits 1 for "there are differences": an error exits above it, as kubectl diff's.
    return command.kind === 'diff' && code === EXIT.failed ? EXIT.usage : code;
  } finally {
    early?.close();
    await client.connection.close();
  }
}

const noError = (): undefined => undefined;

/**
 * The connection to Temporal, under way (its check running beside the command's first call). With
 * --request-timeout, connecting is one request under that bound (else the CLI's own, `CONNECT_TIMEOUT_MS`).
 */
function open(
  settings: TemporalSettings,
  requestTimeoutMs: number | undefined,
  bound: RequestBound | undefined,
): { client: Client; verified: Promise<void> } | { connectError: unknown } {
  let opened: ReturnType<typeof openWith>;
  try {
    // The SDK's own deadline a second later, so that the bound's error is the one that tells.
    const connectTimeoutMs = requestTimeoutMs ? requestTimeoutMs + 1_000 : CONNECT_TIMEOUT_MS;
    opened = openWith(settings, connectTimeoutMs, bound?.interceptors);
  } catch (connectError) {
    return { connectError };
  }
  const verified = requestTimeoutMs
    ? Promise.race([opened.verified, late(new RequestTimeoutError('connect', requestTimeoutMs, settings.address))])
    : opened.verified;
  verified.catch(() => undefined); // awaited once the input is known to be good
  return { client: opened.client, verified };
}

/** Rejects with `err` after its `timeoutMs`, without keeping the process alive. */
function late(err: RequestTimeoutError): Promise<never> {
  return new Promise((_resolve, reject) => setTimeout(() => reject(err), err.timeoutMs).unref());
}

/** Each command's module is loaded when it runs. */
async function run(ctx: CliContext, command: ServerCommand, docs: ModelDocument[]): Promise<number> {
  if ('dryRun' in command && command.dryRun === 'server') {
    return (await import('./dry-run-server.js')).dryRunServerCommand(ctx, command, docs);
  }
  switch (command.kind) {
    case 'serve':
    case 'update':
    case 'apply':
      return (await import('./serve.js')).documentsCommand(ctx, command, docs);
    case 'status':
      return (await import('./status.js')).statusCommand(ctx, command);
    case 'list':
      return (await import('./status.js')).listCommand(ctx, command);
    case 'delete':
      return (await import('./delete.js')).deleteCommand(ctx, command, docs);
    case 'diff':
      return (await import('./diff.js')).diffCommand(ctx, docs);
    case 'rollout':
      return (await import('./rollout.js')).rolloutCommand(ctx, command);
    case 'move': {
      const { moveCommand } = await import('./move.js');
      // A move followed with --wait is one long wait: --timeout bounds it.
      return command.action === 'start' && command.wait
        ? withoutRequestTimeout(() => moveCommand(ctx, command, docs))
        : moveCommand(ctx, command, docs);
    }
    case 'watch': {
      const { watchCommand } = await import('./watch.js');
      // A watch is one long wait: --timeout bounds it.
      return withoutRequestTimeout(() => watchCommand(ctx, command));
    }
  }
}
