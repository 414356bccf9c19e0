// What a command that talks to Temporal does before it needs the Temporal SDK: read the Temporal settings and the
// document, validate it, and for `ferry update` and `ferry delete --cluster` send the update itself
// (client/early-update.ts). `client/cli.ts` runs this before the commands and the SDK load, so that the update is
// on its way while they load; `run.ts` runs it for every other command. When the
// workflow's answer is all the command prints (no `--wait`), the prelude prints it and the SDK never loads.
import { type Accepted, type EarlyUpdate, SDK_IDENTITY, sendEarlyUpdate } from '../early-update.js';
import { readLocalStackEnv } from '../local-stack.js';
import { temporalSettingsFromEnv, type TemporalSettings } from '../temporal-env.js';
import { modelRefOf, UPDATE_NAMES, workflowIdFor } from '../../workflows/contract/identity.js';
import type { UpdateResult } from '../../workflows/contract/messages.js';
import { type Command, sendsEarly } from './args.js';
import { EXIT } from './exit-codes.js';
import { type CliIO, printJson } from './io.js';
import { deletingLine, updatedLine } from './lines.js';
import type { ModelDocument } from './read-document.js';

export type ServerCommand = Exclude<Command, { kind: 'help' | 'version' | 'explain' | 'completion' }>;

/** Where Temporal is (or why that cannot be read: bad input). */
export type Target = { settings: TemporalSettings; webUiUrl?: string } | { error: unknown };

/** The command's documents, when it takes some (or why they cannot be used: bad input). */
export type Input = { docs?: ModelDocument[] } | { error: unknown };

export interface Prepared {
  target: Target;
  input: Input;
  /** The command's update, already sent (`ferry update`, and `ferry delete` with `--cluster`). */
  early?: EarlyUpdate;
}

/** Reads the settings and the document; sends the update of a command that `sendsEarly` when both are good. */
export async function prepareCommand(command: ServerCommand, io: CliIO): Promise<Prepared> {
  const target = targetOf(command, io);
  const input = await inputOf(command, io);
  if (!('settings' in target) || 'error' in input || !sendsEarly(command)) return { target, input };
  // Early only for one document: several are sent one after another, by the SDK.
  const only = input.docs?.length === 1 ? input.docs[0] : undefined;
  const request =
    // A placed document's cluster is found by the SDK's path (client/place-model.ts).
    command.kind === 'update' && only && !only.spec.spec.placement
      ? {
          workflowId: workflowIdFor(modelRefOf(only.spec)),
          updateName: UPDATE_NAMES.update,
          // Who asks, as the SDK's client would say it (its default identity): the same update either way.
          arg: { spec: only.doc, requestedBy: SDK_IDENTITY },
        }
      : command.kind === 'delete' && 'ref' in command && command.ref.cluster !== undefined
        ? {
            workflowId: workflowIdFor({ ...command.ref, cluster: command.ref.cluster }),
            updateName: UPDATE_NAMES.delete,
            arg: { ...(command.reason ? { reason: command.reason } : {}), requestedBy: SDK_IDENTITY },
          }
        : undefined;
  if (!request) return { target, input };
  const early = sendEarlyUpdate(target.settings, request, io.env);
  return { target, input, ...(early ? { early } : {}) };
}

/**
 * Ends a command whose early update the workflow has accepted, when that answer is all the command prints: `ferry
 * update` (its result comes with the acceptance) and `ferry delete`, without `--wait`. They print what the commands
 * would print, and exit without loading them and the Temporal SDK, which would take the CPU from a worker on the
 * same machine while it acts on the update. `undefined` for anything else: the commands go on under the same update
 * ID (a wait, a result that is not there or not a change's).
 */
export function finishEarly(
  command: ServerCommand,
  io: CliIO,
  prepared: Prepared,
  accepted: Accepted,
): number | undefined {
  // YAML and names are the commands' to print (the prelude does without YAML's printer).
  if (command.output !== 'text' && command.output !== 'json') return undefined;
  const docs = 'docs' in prepared.input ? prepared.input.docs : undefined;
  if (command.kind === 'update' && !command.wait && docs?.length === 1) {
    const result = accepted.completed?.result;
    if (!isUpdateResult(result)) return undefined;
    if (command.output === 'json') printJson({ io }, result);
    else io.stdout.write(`${updatedLine(modelRefOf(docs[0]!.spec), result)}\n`);
    return EXIT.ok;
  }
  if (command.kind === 'delete' && !command.wait && 'ref' in command && command.ref.cluster !== undefined) {
    const ref = { name: command.ref.name, namespace: command.ref.namespace, cluster: command.ref.cluster };
    if (command.output === 'json') printJson({ io }, { ref, alreadyDeleted: false });
    else io.stdout.write(`${deletingLine(ref)}\n`);
    return EXIT.ok;
  }
  return undefined;
}

/** Whether an update's result is `updateModel`'s (from a worker of this version or one that answers alike). */
function isUpdateResult(value: unknown): value is UpdateResult {
  const r = value as Partial<UpdateResult> | null | undefined;
  return (
    typeof r === 'object' &&
    r !== null &&
    r.accepted === true &&
    Number.isInteger(r.generation) &&
    typeof r.changed === 'boolean' &&
    typeof r.sourceChanged === 'boolean' &&
    Array.isArray(r.changes) &&
    r.changes.every((c) => typeof c === 'string')
  );
}

/** The Temporal settings of the command line and the environment. */
export function targetOf(command: ServerCommand, io: CliIO): Target {
  try {
    const local = readLocalStackEnv(io.env, io.cwd).vars;
    const settings = temporalSettingsFromEnv(io.env, command.temporal, local);
    const webUiUrl =
      io.env.TEMPORAL_UI_URL || (io.env.TEMPORAL_ADDRESS ? undefined : local.TEMPORAL_UI_URL) || undefined;
    return { settings, ...(webUiUrl ? { webUiUrl } : {}) };
  } catch (error) {
    return { error };
  }
}

/** The documents of the command's -f (serve, update, apply, diff, delete -f, move -f), read and validated. */
export async function inputOf(command: ServerCommand, io: CliIO): Promise<Input> {
  if (!('files' in command) || !command.files) return {};
  // A move's -n is its model's namespace: a document that names none is in it.
  const namespace =
    command.kind === 'move' ? command.ref.namespace : 'namespace' in command ? command.namespace : undefined;
  try {
    // Loaded here, not up front: `ferry delete NAME` needs neither YAML nor the schema (zod) to send its update.
    const { readModelDocuments } = await import('./read-document.js');
    return { docs: await readModelDocuments(io, { files: command.files, ...(namespace ? { namespace } : {}) }) };
  } catch (error) {
    return { error };
  }
}
