// Startup: a replica of the current revision answers /health (and, when it can be read, lists the models it serves),
// within engine.startupTimeout.
import type { Activities } from '../activity-options.js';
import type { HealthResult, ServedModel, Slot } from '../contract/index.js';
import { slotOf, type StepContext } from './context.js';
import type { StepRow } from './table.js';

export const startupRow: StepRow = {
  phase: 'engine',
  condition: { type: 'Healthy', reason: 'Healthy', message: 'a replica of the current revision answers /health' },
  progress: ['startup'],
  budget: 'startup',
};

/** Waits for a healthy replica of the current revision; returns where it answers. */
export async function awaitHealth(
  ctx: StepContext,
  acts: Activities,
  spec: ServedModel,
  generation: number,
  slot?: Slot,
): Promise<HealthResult> {
  return await ctx.step(
    'startup',
    generation,
    () => acts.startup.awaitHealth({ model: spec, ...slotOf({ slot }) }),
    (r) =>
      r.models.length
        ? `${r.endpoint} serves ${r.models.join(', ')}`
        : `${r.endpoint} answers /health; ${r.note ?? 'no model list'}`,
  );
}
