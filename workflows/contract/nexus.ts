// The Nexus service through which workflows in other Temporal namespaces use Ferry: ensure a model is served and
// Ready, delete it, read its status. The serving workflow lives for months, far beyond one Nexus operation, so the
// long operations are backed by short command workflows on Ferry's worker; cancelling one (a caller that is cancelled)
// stops the command, never the model.
import * as nexus from 'nexus-rpc';
import type { ModelRef } from './identity.js';
import type { ModelStatus, MovedTo } from './status.js';

export interface EnsureModelInput {
  /** The ServedModel document; served if not running, made the spec if it is (the same document is a no-op). */
  document: unknown;
  /** How long to wait for Ready. Default: the spec's download deadline plus its startup timeout plus 10 minutes. */
  timeoutMs?: number;
}

export interface EnsureModelOutput {
  ref: ModelRef;
  workflowId: string;
  generation: number;
  endpoint: string;
  servedModelName: string;
}

export interface DeleteModelOperationInput {
  ref: ModelRef;
  reason?: string;
}

export interface DeleteModelOperationOutput {
  ref: ModelRef;
  alreadyDeleted: boolean;
  deleted: string[];
  retained: string[];
}

/**
 * What a command workflow behind `ensureModel` is started with: the caller's input, and the tenant whose endpoint the
 * request came through, which the handler sets (never the caller; docs/security.md).
 */
export interface EnsureModelCommandInput extends EnsureModelInput {
  tenant?: string;
  /** Who asked, for audit: the tenant and the caller the request's links name (the handler writes it). */
  requestedBy?: string;
  /**
   * The cluster whose worker checks the tenant's grant first (`checkTenantGrant`): set by the handler when the grant
   * allows Secrets or PVCs of the document by their labels, which only that cluster knows.
   */
  checkGrantOn?: string;
}

/** What a command workflow behind `deleteModel` is started with (see `EnsureModelCommandInput`). */
export interface DeleteModelCommandInput extends DeleteModelOperationInput {
  tenant?: string;
  /** See `EnsureModelCommandInput`. */
  requestedBy?: string;
  /** A move's teardown of the model it moved (`DeleteModelInput.movedTo`). */
  movedTo?: MovedTo;
  /**
   * How long to wait for the teardown (default: until it is done). Past it the activity returns with `pending`, and the
   * teardown goes on in the model's workflow; a delete its workflow has not even accepted by then (no worker of its
   * cluster) is sent again as the delete signal, which the workflow applies once a worker is back (`signalled`).
   */
  waitMs?: number;
}

/** What the serving activity `deleteServedModel` returns: the operation's output, or a teardown still under way. */
export interface DeleteServedModelOutput extends DeleteModelOperationOutput {
  /** Accepted, but not done within `waitMs` (its cluster has not answered): the model's workflow goes on with it. */
  pending?: boolean;
  /** Not accepted within `waitMs` (no worker of its cluster): sent as the delete signal; `pending` as well. */
  signalled?: boolean;
}

export const ferryModelsService = nexus.service('ferry.models.v1', {
  /** Serve (or update) a model and wait until it is Ready at that spec; returns its endpoint. */
  ensureModel: nexus.operation<EnsureModelInput, EnsureModelOutput>(),
  /** Tear a model down; returns what was deleted and what was retained. */
  deleteModel: nexus.operation<DeleteModelOperationInput, DeleteModelOperationOutput>(),
  /** The model's full status, at once. */
  getModelStatus: nexus.operation<{ ref: ModelRef }, ModelStatus>(),
});
