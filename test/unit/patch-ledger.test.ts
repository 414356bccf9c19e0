// The patch ledger (workflows/patches.ts) and the workflow code hold the same patch IDs, in the same modules, in the
// same state: an unlisted patch, a listed one the code dropped, or one moved or deprecated without the ledger fails.
import { describe, expect, it } from 'vitest';
import { PATCH_LEDGER } from '../../workflows/patches.js';
import { ledgerProblems, patchUses, patchUsesUnder } from '../support/patch-scan.js';
import { repoRoot } from '../support/local-env.js';

describe('the patch ledger', () => {
  it('lists every patch workflow code holds, and nothing else', () => {
    const uses = patchUsesUnder(repoRoot, 'workflows');
    expect(uses.length).toBeGreaterThanOrEqual(PATCH_LEDGER.length);
    expect(ledgerProblems(uses, PATCH_LEDGER)).toEqual([]);
  });

  it('says what each patch guards, when it came and when it may go', () => {
    for (const entry of PATCH_LEDGER) {
      expect(entry.guards.length, entry.id).toBeGreaterThan(10);
      expect(entry.introduced, entry.id).toMatch(/^v\d+\.\d+\.\d+$/);
      expect(entry.retire.length, entry.id).toBeGreaterThan(10);
    }
  });

  it('fails on a patch the ledger lacks, one it names that code dropped, and one deprecated behind its back', () => {
    const source = [
      "const NEW_STEP = 'scale-step';",
      'if (patched(NEW_STEP)) await scale();',
      "deprecatePatch('admission');",
    ].join('\n');
    const uses = patchUses(source, 'workflows/steps/admission.ts');
    expect(uses).toEqual([
      { id: 'scale-step', kind: 'patched', module: 'workflows/steps/admission.ts' },
      { id: 'admission', kind: 'deprecated', module: 'workflows/steps/admission.ts' },
    ]);
    const ledger = [
      { id: 'admission', module: 'workflows/steps/admission.ts', state: 'patched' as const },
      { id: 'gone', module: 'workflows/lifecycle.ts', state: 'patched' as const },
    ];
    expect(ledgerProblems(uses, ledger)).toEqual([
      "workflows/steps/admission.ts holds patch 'scale-step', which the ledger (workflows/patches.ts) lacks",
      "patch 'admission' is deprecated in workflows/steps/admission.ts; the ledger says patched",
      "the ledger names patch 'gone', which no workflow code holds",
    ]);
  });

  it('refuses a patch ID it cannot read (computed), rather than missing it', () => {
    expect(() => patchUses('patched(`lora-${n}`)', 'workflows/x.ts')).toThrow(/not a string literal or a constant/);
  });
});
