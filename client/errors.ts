// What can go wrong when talking to a model, as typed errors: programs branch on the class, the CLI maps each to an
// exit code, and every message says what to do next.
import type {
  ClusterReading,
  ModelError,
  ModelRef,
  ModelStatus,
  Phase,
  SpecIssue,
} from '../workflows/contract/index.js';
// From the identity and the spec alone (zod), not the whole contract (the Temporal SDK): the CLI's prelude loads this
// module when it reads a document.
import { describeRef } from '../workflows/contract/identity.js';
import { formatSpecIssues } from '../workflows/contract/spec/index.js';

export { describeRef };

/** Base class of every error the client library throws on purpose. */
export class FerryClientError extends Error {
  override readonly name: string = 'FerryClientError';
}

/** `ferry rollout approve|abort` found nothing to act on: no rollout under way, none waiting for an approval. */
export class NoRolloutError extends FerryClientError {
  override readonly name = 'NoRolloutError';
}

/** The document is not a valid ServedModel: rejected by the client before anything started, or by the workflow's
 * update validator (`rejectedBy: 'workflow'`, e.g. an immutable field changed). */
export class InvalidSpecError extends FerryClientError {
  override readonly name = 'InvalidSpecError';

  constructor(
    readonly issues: SpecIssue[],
    readonly rejectedBy: 'client' | 'workflow' = 'client',
    options?: ErrorOptions,
  ) {
    const n = issues.length;
    super(`invalid ServedModel (${n} problem${n === 1 ? '' : 's'}):\n${indent(formatSpecIssues(issues))}`, options);
  }
}

/** The model is already served with another spec; starting it again would silently ignore the difference. */
export class SpecConflictError extends FerryClientError {
  override readonly name = 'SpecConflictError';

  constructor(
    readonly ref: ModelRef,
    /** Dotted paths of the fields that differ from the running spec. */
    readonly changes: string[],
  ) {
    super(
      `${describeRef(ref)} is already served with a different spec (it differs in ${changes.join(', ')}); ` +
        'change it with `ferry update -f <file>` (updateModel) or `ferry apply -f <file>` (applyModel), ' +
        'or delete it first',
    );
  }
}

/**
 * `applyModel` with a `claim` found a model of that name running that no call with the claim started: nothing was sent
 * to it (a move's target taken in the meantime, for one).
 */
export class ModelExistsError extends FerryClientError {
  override readonly name = 'ModelExistsError';

  constructor(readonly ref: ModelRef) {
    super(`${describeRef(ref)} is served already, and not by this request: nothing was sent to it`);
  }
}

export class ModelNotFoundError extends FerryClientError {
  override readonly name = 'ModelNotFoundError';

  constructor(
    readonly ref: ModelRef,
    detail = 'no such model',
  ) {
    super(`${describeRef(ref)}: ${detail}`);
  }
}

/** The model is being deleted (or was deleted while someone waited for it to become Ready). */
export class ModelDeletedError extends FerryClientError {
  override readonly name = 'ModelDeletedError';

  constructor(
    readonly ref: ModelRef,
    readonly phase: Extract<Phase, 'Deleting' | 'Deleted'>,
    hint = '',
  ) {
    super(`${describeRef(ref)} is ${phase === 'Deleting' ? 'being deleted' : 'deleted'}${hint ? `; ${hint}` : ''}`);
  }
}

/** The model reached phase Failed: `reason` is the named failure (ImagePullBackOff, DeadlineExceeded, …). */
export class ModelFailedError extends FerryClientError {
  override readonly name = 'ModelFailedError';
  readonly reason: string;

  constructor(
    readonly ref: ModelRef,
    readonly error: ModelError | undefined,
    readonly status: ModelStatus | undefined,
  ) {
    super(error?.message ?? `${describeRef(ref)} failed`);
    this.reason = error?.reason ?? 'Failed';
  }
}

/** The workflow of the model ended without deleting it (terminated, timed out, or failed by a bug). */
export class ModelWorkflowClosedError extends FerryClientError {
  override readonly name = 'ModelWorkflowClosedError';

  constructor(
    readonly ref: ModelRef,
    readonly executionStatus: string,
    /** Why it failed, when it did: the workflow's own failure (type and message). */
    readonly failure?: { type?: string; message: string },
  ) {
    const why = failure ? `: ${failure.type ? `${failure.type}: ` : ''}${failure.message}` : '';
    // A document this client accepted and the workflow refused at its start: the worker runs another Ferry.
    const hint =
      failure?.type === 'InvalidSpec' || failure?.type === 'UnsupportedInput'
        ? ' (the worker refused a document this client accepts: is the worker an older Ferry than the client?)'
        : '';
    super(
      `the workflow of ${describeRef(ref)} ended (${executionStatus.toLowerCase()})${why}${hint}: the model is no longer managed`,
    );
  }
}

/** A wait ran out of time; the model keeps going, only the caller stopped waiting. */
export class WaitTimeoutError extends FerryClientError {
  override readonly name = 'WaitTimeoutError';

  constructor(
    readonly ref: ModelRef,
    readonly timeoutMs: number,
    readonly what: string,
    readonly lastStatus?: ModelStatus,
    hint?: string,
  ) {
    const last = lastStatus
      ? ` (last phase ${lastStatus.phase}${lastStatus.waiting ? `, waiting: ${lastStatus.waiting.reason}` : ''})`
      : '';
    super(`${describeRef(ref)} did not ${what} within ${formatMs(timeoutMs)}${last}${hint ? `; ${hint}` : ''}`);
  }
}

/** Temporal is not reachable at `address`. */
export class ConnectError extends FerryClientError {
  override readonly name = 'ConnectError';

  constructor(
    readonly address: string,
    readonly hint?: string,
    options?: ErrorOptions,
  ) {
    const cause = options?.cause instanceof Error ? `: ${causeText(options.cause)}` : '';
    super(`cannot connect to Temporal at ${address}${cause}${hint ? `; ${hint}` : ''}`, options);
  }
}

/** An error's message, followed by what its causes add: the SDK wraps the server's answer in a generic message. */
function causeText(err: Error): string {
  const details: string[] = [];
  for (let c = err.cause; c instanceof Error && details.length < 3; c = c.cause) {
    if (c.message && !err.message.includes(c.message)) details.push(c.message);
  }
  return details.length > 0 ? `${err.message} (${details.join('; ')})` : err.message;
}

/** Temporal answered, but no Ferry worker polls the model's task queue, so its status cannot be read. */
export class NoWorkerError extends FerryClientError {
  override readonly name = 'NoWorkerError';

  constructor(
    readonly ref: ModelRef,
    readonly taskQueue: string,
  ) {
    super(
      `no Ferry worker polls task queue ${taskQueue}, so ${describeRef(ref)} cannot answer: ` +
        `start a worker with FERRY_CLUSTER=${ref.cluster}`,
    );
  }
}

/** No listed cluster had room for the model's replicas (or none's worker answered): nothing was created. */
export class NoCapacityError extends FerryClientError {
  override readonly name = 'NoCapacityError';

  constructor(
    readonly ref: Pick<ModelRef, 'namespace' | 'name'>,
    /** Each listed cluster as the placement saw it: its free GPUs, or why it did not answer. */
    readonly clusters: ClusterReading[],
    reason: string,
  ) {
    super(`cannot place ${ref.namespace}/${ref.name}: ${reason}; nothing was created`);
  }
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n');
}

function formatMs(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1_000 === 0) return `${ms / 1_000}s`;
  return `${ms}ms`;
}
