// A default added after specs were accepted reaches only documents that are new: a spec accepted before keeps the pod
// template it had, so a Ferry upgrade rolls out no engine (workflows/accepted-defaults.ts).
import { describe, expect, it } from 'vitest';
import { parseServedModel } from '../../workflows/contract/index.js';
import { withAcceptedDefaults } from '../../workflows/accepted-defaults.js';
import { minimalHf } from './fixtures.js';

describe('defaults added after specs were accepted', () => {
  const parsed = parseServedModel(minimalHf);

  it('reach a new document that does not name them', () => {
    const model = withAcceptedDefaults(minimalHf, parsed, () => true);
    expect(model.spec.scheduling.colocateReplicas).toBe(true);
    expect(model.spec.engine.image).toBe('vllm/vllm-openai:v0.32.0');
  });

  it('do not reach a document accepted before them, which keeps the old behaviour', () => {
    let asked = 0;
    const old = withAcceptedDefaults(minimalHf, parsed, () => (asked++, false));
    expect(old.spec.scheduling.colocateReplicas).toBe(false);
    expect(old.spec.engine.image).toBe('vllm/vllm-openai:v0.11.0');
    expect(asked).toBe(1);
  });

  it('leave a document that names the field as it says, without asking whether it is new', () => {
    const doc = structuredClone(minimalHf) as { spec: { scheduling?: Record<string, unknown> } };
    doc.spec.scheduling = { colocateReplicas: true };
    (doc.spec as { engine?: Record<string, unknown> }).engine = { image: 'vllm/vllm-openai:v0.32.0' };
    const model = parseServedModel(doc);
    expect(
      withAcceptedDefaults(doc, model, () => {
        throw new Error('not asked');
      }).spec.scheduling.colocateReplicas,
    ).toBe(true);
  });
});
