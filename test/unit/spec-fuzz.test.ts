import fc from 'fast-check';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { parseModelDocument, parseModelYaml } from '../../client/document.js';
import { InvalidSpecError } from '../../client/errors.js';
import { build, fuzzCase } from '../support/spec-mutations.js';
import { fullHf } from './fixtures.js';

// Property-based fuzz of the document parser: valid documents, mutated with hostile input, given as objects to
// parseModelDocument or as YAML text to parseModelYaml. For every case: nothing but an InvalidSpecError is thrown,
// a rejection takes under 100 ms, every issue prints in under 1 KB, and a mutation known to be invalid is rejected.
// `npm run fuzz` runs 10,000 cases (FERRY_FUZZ_RUNS); the default run, 2,000.
const RUNS = Number(process.env.FERRY_FUZZ_RUNS ?? 2000);

// ---------------------------------------------------------------------------------------------------------------

describe('the document parser under fuzzing', () => {
  it(
    `rejects hostile documents quickly, clearly and always (${RUNS} cases)`,
    () => {
      const stats = { cases: 0, yaml: 0, rejected: 0, accepted: 0, acceptedInvalid: 0, maxMs: 0, maxBytes: 0 };
      const encoder = new TextEncoder();
      // Warm up the parser so the first cases do not pay for compiling it.
      for (let i = 0; i < 20; i++) parseModelDocument(parseModelYaml(stringify(fullHf)));

      fc.assert(
        fc.property(fuzzCase, (fuzz) => {
          const { input, text, validity } = build(fuzz);
          const parse = (): { error?: InvalidSpecError; ms: number } => {
            const start = performance.now();
            try {
              parseModelDocument(text === undefined ? input : parseModelYaml(text));
            } catch (err) {
              if (!(err instanceof InvalidSpecError)) throw err;
              return { error: err, ms: performance.now() - start };
            }
            return { ms: performance.now() - start };
          };
          const { error, ms: first } = parse();
          let ms = first;
          // The time is the parser's, not the machine's: a slow run (other tests on the same cores, a collection
          // of a large heap) is measured again, and the fastest run counts.
          for (let again = 0; ms >= 100 && again < 3; again++) ms = Math.min(ms, parse().ms);
          stats.cases++;
          if (text !== undefined) stats.yaml++;
          if (error) {
            stats.rejected++;
            stats.maxMs = Math.max(stats.maxMs, ms);
            expect(ms, `a rejection took ${ms.toFixed(1)} ms`).toBeLessThan(100);
            expect(error.issues.length).toBeGreaterThan(0);
            for (const issue of error.issues) {
              const bytes = encoder.encode(`${issue.path}: ${issue.message}`).length;
              stats.maxBytes = Math.max(stats.maxBytes, bytes);
              expect(bytes, 'an issue takes 1 KB or more').toBeLessThan(1024);
            }
            expect(encoder.encode(error.message).length).toBeLessThan(22 * 1024);
          } else {
            stats.accepted++;
            if (validity === 'invalid') stats.acceptedInvalid++;
          }
          expect(validity === 'invalid' && !error, 'a document known to be invalid was accepted').toBe(false);
          expect(validity === 'valid' && error, `a valid document was rejected: ${error?.message}`).toBeFalsy();
        }),
        { numRuns: RUNS },
      );

      console.log(
        `spec fuzz: ${stats.cases} cases (${stats.yaml} as YAML), ${stats.rejected} rejected, ${stats.accepted} accepted, ` +
          `${stats.acceptedInvalid} accepted-invalid, max rejection ${stats.maxMs.toFixed(1)} ms, ` +
          `max message ${stats.maxBytes} bytes`,
      );
      expect(stats.acceptedInvalid).toBe(0);
    },
    30_000 + RUNS * 30,
  );
});
