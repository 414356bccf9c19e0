// The spec an accepted update brings: parsed against the current spec, with the defaults of its day, and — replayed
// by newer code — accepted as it was even where a rule added since would refuse it.
import { log } from '@temporalio/workflow';
import { patchedUnlessPinned } from './pinned.js';
import {
  asAcceptedBefore,
  expiredProblem,
  failure,
  INVALID_SPEC,
  SpecError,
  specForUpdate,
  type ServedModel,
} from './contract/index.js';
import { withAcceptedDefaults } from './accepted-defaults.js';

/** Updates this code is the first to see get the defaults added since (accepted-defaults.ts); replayed ones do not. */
const NEW_DEFAULTS_IN_UPDATE = 'defaults-2026-12-update';

/**
 * The update's spec. The validator has accepted it, so a refusal here is a replay of an update accepted before a
 * rule that now refuses it: it is replayed as it was accepted, or the workflow task would fail on every attempt.
 */
export function acceptedUpdateSpec(desired: ServedModel, doc: unknown): ServedModel {
  const isNew = () => patchedUnlessPinned(NEW_DEFAULTS_IN_UPDATE);
  try {
    return withAcceptedDefaults(doc, specForUpdate(desired, doc), isNew);
  } catch (err) {
    if (!(err instanceof SpecError)) throw err;
    log.warn('the update breaks a rule it was accepted without; applying it as it was accepted', {
      issues: err.message,
    });
    return withAcceptedDefaults(
      doc,
      asAcceptedBefore(() => specForUpdate(desired, doc)),
      isNew,
    );
  }
}

/** Rejects an invalid update document before it reaches history, with the parser's field-level issues. */
export function checkUpdateSpec(desired: ServedModel, doc: unknown): void {
  try {
    const next = specForUpdate(desired, doc);
    // A time that has passed would delete the model the moment the update lands (validators run on no replay).
    const expired = expiredProblem(next.spec.expiresAt, Date.now());
    if (expired) throw new SpecError([{ path: 'spec.expiresAt', message: expired }]);
  } catch (err) {
    if (err instanceof SpecError) throw failure(INVALID_SPEC, err.message, err.issues);
    throw err;
  }
}
