// The local activity that decides on a signalled update (workflows/signalled.ts). The check is the Update validator's
// (contract/spec/updates.ts), run on the worker so that its verdict lands in history as the activity's result: a
// replay reads the verdict instead of deciding again with rules added since, which could decide the other way.
import {
  INVALID_SPEC,
  SpecError,
  specForUpdate,
  type FerryLocalActivities,
  type SpecChangeCheck,
  type SpecChangeVerdict,
} from '../workflows/contract/index.js';

async function checkSpecChange({ desired, doc }: SpecChangeCheck): Promise<SpecChangeVerdict> {
  try {
    specForUpdate(desired, doc);
    return { accepted: true };
  } catch (err) {
    if (err instanceof SpecError) return { accepted: false, reason: INVALID_SPEC, message: err.message };
    throw err;
  }
}

/** The local activities of ServeModelWorkflow: every worker that runs the workflow registers them. */
export const localActivities: FerryLocalActivities = { checkSpecChange };
