// The libraries the worker instantiates once per worker thread and shares between all workflows, in place of once
// per cached workflow (worker/workflow-bundle.ts). Imported here exactly as the workflows import them, so the preload
// loads the very modules they later use; a library imported by name alone would be dropped from the bundle, as both
// declare themselves free of side effects. Only libraries without per-workflow state belong here.
import { Cron } from 'croner';
import { z } from 'zod';

// zod writes its defaults (English messages, its memoizer) into its global config when the first schema and the first
// object schema are built: both are built here, before the SDK freezes what was preloaded, so that no workflow's first
// schema writes to a frozen config (test/unit/workflow-bundle.test.ts parses every example in a workflow's scope).
z.object({ name: z.string() });

export const PRELOADED = [z, Cron] as const;
