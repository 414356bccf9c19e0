// Which exit code (exit-codes.ts) an error ends a command with.
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
import { EXIT } from './exit-codes.js';
import { RequestTimeoutError } from './request-timeout.js';

/** The exit code for an error. */
export function exitCodeOf(err: unknown): number {
  if (err instanceof UsageError || err instanceof InvalidSpecError || err instanceof SpecConflictError)
    return EXIT.usage;
  if (err instanceof ModelNotFoundError) return EXIT.notFound;
  if (err instanceof WaitTimeoutError || err instanceof RequestTimeoutError) return EXIT.timeout;
  if (err instanceof ConnectError || err instanceof NoWorkerError || isUnavailable(err)) return EXIT.unavailable;
  if (err instanceof ModelFailedError) return EXIT.failed;
  return EXIT.failed;
}
