// A default added after specs were accepted reaches only documents that are new: a spec accepted before keeps the pod
// template it had, so a Ferry upgrade rolls out no engine (workflows/accepted-defaults.ts).
import { describe, expect, it } from 'vitest';
import { parseServedModel } from '../../workflows/contract/index.js';
import { withAcceptedDefaults } from '../../workflows/accepted-defaults.js';
import { minimalHf } from './fixtures.js';

describe('defaults added after specs were accepted', () => {
  const parsed = parseServedModel(minimalHf);

  it('reach a new document that does not name them', () => {
    expect(withAcceptedDefaults(minimalHf, parsed, () => true).spec.scheduling.colocateReplicas).toBe(true);
  });

  it('do not reach a document accepted before them, which keeps the old behaviour', () => {
    let asked = 0;
    const old = withAcceptedDefaults(minimalHf, parsed, () => (asked++, false));
    expect(old.spec.scheduling.colocateReplicas).toBe(false);
    expect(asked).toBe(1);
  });

  it('leave a document that names the field as it says, without asking whether it is new', () => {
    const doc = structuredClone(minimalHf) as { spec: { scheduling?: Record<string, unknown> } };
    doc.spec.scheduling = { colocateReplicas: true };
    const model = parseServedModel(doc);
    expect(
      withAcceptedDefaults(doc, model, () => {
        throw new Error('not asked');
      }).spec.scheduling.colocateReplicas,
    ).toBe(true);
  });
});
