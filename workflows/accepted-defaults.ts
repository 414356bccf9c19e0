// Defaults added to the ServedModel schema after specs were accepted without them. Parsing a document again (a run's
// start, an update's handler, both replayed by newer code) fills in today's defaults; for a spec accepted before a
// default existed that would change what its objects look like, and a Ferry upgrade would roll out its engine. So a
// document that does not name such a field gets the old behaviour unless it is new: a start or an update that this
// code is the first to see (`patched`, so that a replay decides the same way).
import type { ServedModel } from './contract/index.js';

/** The engine image Ferry defaulted to before 2026-12 (then vLLM 0.32, the one the local stack runs for real). */
const ENGINE_IMAGE_BEFORE = 'vllm/vllm-openai:v0.11.0';

const names = (section: unknown, field: string): boolean =>
  typeof section === 'object' && section !== null && field in section;

/** The spec as parsed, with each later default turned back to its old behaviour where the document is not new. */
export function withAcceptedDefaults(doc: unknown, model: ServedModel, isNew: () => boolean): ServedModel {
  const spec = (doc as { spec?: { scheduling?: unknown; engine?: unknown } } | undefined)?.spec;
  // scheduling.colocateReplicas (default true) and engine.image (default vLLM 0.32), both since 2026-12.
  const colocate = names(spec?.scheduling, 'colocateReplicas');
  const image = names(spec?.engine, 'image');
  if ((colocate && image) || isNew()) return model;
  const { scheduling, engine } = model.spec;
  return {
    ...model,
    spec: {
      ...model.spec,
      scheduling: colocate ? scheduling : { ...scheduling, colocateReplicas: false },
      engine: image ? engine : { ...engine, image: ENGINE_IMAGE_BEFORE },
    },
  };
}
