// What `ferry` says of a bad command line, for the CLI's unit tests.
import { parseCommand, UsageError } from '../../client/cli/args.js';

/** The `UsageError`'s message for `argv`; throws if `argv` parses, or fails otherwise. */
export function usageOf(argv: string[]): string {
  try {
    parseCommand(argv);
  } catch (err) {
    if (err instanceof UsageError) return err.message;
    throw err;
  }
  throw new Error(`parsed without error: ${argv.join(' ')}`);
}
