// What a command that talks to Temporal reads before it needs the server: the Temporal settings and the documents,
// validated. `run.ts` reads them while the connection opens; a client-side dry run and diff use the documents too.
import { readLocalStackEnv } from '../local-stack.js';
import { temporalSettingsFromEnv, type TemporalSettings } from '../temporal-env.js';
import type { Command } from './args.js';
import type { CliIO } from './io.js';
import type { ModelDocument } from './read-document.js';

export type ServerCommand = Exclude<Command, { kind: 'help' | 'version' | 'explain' | 'completion' }>;

/** Where Temporal is (or why that cannot be read: bad input). */
export type Target = { settings: TemporalSettings; webUiUrl?: string } | { error: unknown };

/** The command's documents, when it takes some (or why they cannot be used: bad input). */
export type Input = { docs?: ModelDocument[] } | { error: unknown };

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

/** The documents of the command's -f (serve, update, apply, diff, delete -f), read and validated. */
export async function inputOf(command: ServerCommand, io: CliIO): Promise<Input> {
  if (!('files' in command)) return {};
  try {
    // Loaded here, not up front: `ferry delete NAME` and `ferry list` need neither YAML nor the schema (zod).
    const { readModelDocuments } = await import('./read-document.js');
    return { docs: await readModelDocuments(io, command) };
  } catch (error) {
    return { error };
  }
}
