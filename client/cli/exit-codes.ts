// Exit codes scripts rely on; `ferry --help` lists them.
import {
  ConnectError,
  InvalidSpecError,
  ModelFailedError,
  ModelNotFoundError,
  NoWorkerError,
  SpecConflictError,
  WaitTimeoutError,
} from '../errors.js';
import { isUnavailable } from '../model-status.js';
import { UsageError } from './args.js';

export const EXIT = {
  /** Done. */
  ok: 0,
  /** The model failed (or the command failed for another reason). */
  failed: 1,
  /** Bad usage, an invalid spec, or a spec that conflicts with the running one. */
  usage: 2,
  /** No such model. */
  notFound: 3,
  /** A wait ran out of time. */
  timeout: 4,
  /** Temporal (or a worker for the model's cluster) cannot be reached. */
  unavailable: 5,
  /** Interrupted (Ctrl-C). */
  interrupted: 130,
} as const;

export function exitCodeOf(err: unknown): number {
  if (err instanceof UsageError || err instanceof InvalidSpecError || err instanceof SpecConflictError)
    return EXIT.usage;
  if (err instanceof ModelNotFoundError) return EXIT.notFound;
  if (err instanceof WaitTimeoutError) return EXIT.timeout;
  if (err instanceof ConnectError || err instanceof NoWorkerError || isUnavailable(err)) return EXIT.unavailable;
  if (err instanceof ModelFailedError) return EXIT.failed;
  return EXIT.failed;
}
