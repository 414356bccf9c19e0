// The step table: each step's row, from its module. Status transitions, the failure classification and the condition
// order read it; a new step is a module with its row, the row here, and its name in the contract's `Step` (TypeScript
// then asks for the row). Read lazily: the step modules import the status code that reads this table.
import type { ConditionType, Phase, Step, StepProgress } from '../contract/index.js';
import { adaptersRow } from './adapters.js';
import { baselineRow } from './baseline.js';
import { claimRow } from './claim.js';
import { downloadRow } from './download.js';
import { startupRow } from './health.js';
import { repairRow } from './look.js';
import { releaseRow } from './release.js';
import { rolloutRow } from './rollout.js';
import { scaleRow } from './scale.js';
import { shiftRow } from './shift.js';
import { stopRow } from './stop.js';
import { storageRow } from './storage.js';
import { teardownRow } from './teardown.js';

export interface StepRow {
  /** The phase while it runs; `engine` is Starting on a first rollout and Updating on a model that has served. */
  phase: Phase | 'engine';
  /** The condition it makes True when it succeeds (Unknown while it runs, False when it fails). */
  condition?: { type: ConditionType; reason: string; message: string };
  /** The `progress` reports (by their `step`) that describe this step while it runs. */
  progress: readonly StepProgress['step'][];
  /** The spec budget its long wait runs against: a timeout means that budget ran out, and is final. */
  budget?: 'puller' | 'startup';
  /** A span over other steps, never "the step running now". */
  span?: true;
}

let rows: Readonly<Record<Step, StepRow>> | undefined;

/** Every step's row, in the order the lifecycle runs them (the conditions are listed in this order). */
function table(): Readonly<Record<Step, StepRow>> {
  rows ??= {
    claim: claimRow,
    storage: storageRow,
    download: downloadRow,
    release: releaseRow,
    stop: stopRow,
    rollout: rolloutRow,
    startup: startupRow,
    adapters: adaptersRow,
    baseline: baselineRow,
    shift: shiftRow,
    teardown: teardownRow,
    /** An update: a span over the steps it runs. */
    update: { phase: 'Updating', progress: [], span: true },
    /** A Degraded spell: from the look that found a problem to the one that found it gone. */
    degraded: { phase: 'Degraded', progress: [], span: true },
    repair: repairRow,
    scale: scaleRow,
  };
  return rows;
}

export function stepRow(step: Step): StepRow {
  return table()[step];
}

let order: readonly ConditionType[] | undefined;

/** The order conditions are listed in: the order the lifecycle satisfies them, `Ready` last. */
export function conditionOrder(): readonly ConditionType[] {
  order ??= [...Object.values(table()).flatMap((row) => (row.condition ? [row.condition.type] : [])), 'Ready'];
  return order;
}
