// Activities that act on models through their workflows, for a worker other than the model's: another team's (a
// trigger in their workflow) and Ferry's own (the Nexus service's command workflows). Idempotent by content: the
// same document again changes nothing, so a retried activity, or a "training finished" event delivered twice,
// serves once.
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import {
  failure,
  FAILURE,
  formatSpecIssues,
  type ApplyServedModelInput,
  type ApplyServedModelResult,
  type ServingActivities,
  deleteModelSignal,
} from '../workflows/contract/index.js';
import { applyModel } from './apply-model.js';
import { DELETE_WAIT, deleteModel } from './delete-model.js';
import {
  InvalidSpecError,
  ModelDeletedError,
  ModelFailedError,
  ModelExistsError,
  ModelNotFoundError,
  NoWorkerError,
  WaitTimeoutError,
} from './errors.js';
import { modelHandle } from './model-status.js';
import { waitForPhase } from './wait-for-phase.js';

/** How often a long wait heartbeats, whatever the model does meanwhile. */
const HEARTBEAT_MS = 10_000;

/** The serving activities on `client`; register them on a worker (`activities: { ...serving }`). */
export function createServingActivities(client: Client): ServingActivities {
  return {
    async applyServedModel({
      document,
      workflowOptions,
      tenant,
      requestedBy,
      claim,
    }: ApplyServedModelInput): Promise<ApplyServedModelResult> {
      try {
        const { ref, workflowId, runId, started, accepted, generation, changed, sourceChanged, changes } =
          await applyModel(client, document, {
            ...(workflowOptions ? { workflowOptions } : {}),
            ...(tenant !== undefined ? { tenant } : {}),
            ...(requestedBy !== undefined ? { requestedBy } : {}),
            ...(claim !== undefined ? { claim } : {}),
          });
        return { ref, workflowId, runId, started, accepted, generation, changed, sourceChanged, changes };
      } catch (err) {
        throw typedFailure(err);
      }
    },

    async awaitModelReady({ ref, generation, timeoutMs }) {
      const ctx = Context.current();
      const beat = setInterval(() => ctx.heartbeat(), HEARTBEAT_MS);
      try {
        return await waitForPhase(client, ref, ['Ready'], {
          timeoutMs: timeoutMs ?? Infinity,
          generation,
          onStatus: (status) => ctx.heartbeat(status.phase),
          signal: ctx.cancellationSignal,
        });
      } catch (err) {
        throw typedFailure(err);
      } finally {
        clearInterval(beat);
      }
    },

    async deleteServedModel({ ref, reason, tenant, requestedBy, movedTo, waitMs }) {
      const ctx = Context.current();
      const beat = setInterval(() => ctx.heartbeat(), HEARTBEAT_MS);
      let accepted = false;
      const deleted = deleteModel(client, ref, {
        wait: true,
        ...(reason ? { reason } : {}),
        ...(tenant !== undefined ? { tenant } : {}),
        ...(requestedBy !== undefined ? { requestedBy } : {}),
        ...(movedTo ? { movedTo } : {}),
        ...(waitMs !== undefined ? { timeoutMs: waitMs } : {}),
        onAccepted: () => (accepted = true),
      });
      try {
        const result = await (waitMs === undefined ? deleted : withinOrUnaccepted(deleted, waitMs, () => accepted));
        if (result === UNACCEPTED) {
          // No worker of the model's cluster took the Update in time, and an Update needs one to land; a signal does
          // not: the workflow applies it when a worker is back, as it would the Update (the first delete wins).
          deleted.catch(() => undefined);
          await modelHandle(client, ref).signal(deleteModelSignal, {
            ...(reason ? { reason } : {}),
            ...(requestedBy !== undefined ? { requestedBy } : {}),
            ...(movedTo ? { movedTo } : {}),
          });
          return { ref, alreadyDeleted: false, deleted: [], retained: [], pending: true, signalled: true };
        }
        return {
          ref,
          alreadyDeleted: result.alreadyDeleted,
          deleted: result.teardown?.deleted ?? [],
          retained: result.teardown?.retained ?? [],
        };
      } catch (err) {
        // Accepted, and going on in the model's workflow: the caller asked to wait only so long.
        if (waitMs !== undefined && err instanceof WaitTimeoutError && err.what === DELETE_WAIT) {
          return { ref, alreadyDeleted: false, deleted: [], retained: [], pending: true };
        }
        throw typedFailure(err);
      } finally {
        clearInterval(beat);
      }
    },
  };
}

const UNACCEPTED = Symbol('unaccepted');

/**
 * `deleted`, or `UNACCEPTED` when the delete was not accepted within `ms` (it then keeps trying; a client on a worker's
 * connection cannot be stopped). A delete refused for want of a worker, or not accepted before its own bound, is
 * unaccepted too. Accepted in time, it is waited for as long as its own bound says.
 */
async function withinOrUnaccepted<T>(
  deleted: Promise<T>,
  ms: number,
  accepted: () => boolean,
): Promise<T | typeof UNACCEPTED> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<typeof UNACCEPTED | undefined>((resolve) => {
    timer = setTimeout(() => resolve(accepted() ? undefined : UNACCEPTED), ms);
  });
  try {
    const first = await Promise.race([
      deleted.catch((err: unknown): typeof UNACCEPTED => {
        if (
          !accepted() &&
          (err instanceof NoWorkerError || (err instanceof WaitTimeoutError && err.what !== DELETE_WAIT))
        )
          return UNACCEPTED;
        throw err;
      }),
      late,
    ]);
    return first === undefined ? await deleted : first;
  } finally {
    clearTimeout(timer);
  }
}

/** What no retry fixes, as the catalogue's non-retryable types; anything else as it is (retried). */
export function typedFailure(err: unknown): unknown {
  if (err instanceof InvalidSpecError) return failure(FAILURE.InvalidSpec, formatSpecIssues(err.issues), err.issues);
  if (err instanceof ModelDeletedError) return failure(FAILURE.ModelDeleting, err.message);
  if (err instanceof ModelNotFoundError) return failure(FAILURE.ModelNotFound, err.message);
  if (err instanceof ModelExistsError) return failure(FAILURE.NameConflict, err.message);
  if (err instanceof ModelFailedError) return failure(FAILURE.ServeFailed, err.message, err.error);
  if (err instanceof WaitTimeoutError) return failure(FAILURE.ReadyTimeout, err.message);
  return err;
}
