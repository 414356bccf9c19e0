// Defaults added to the ServedModel schema after specs were accepted without them. Parsing a document again (a run's
// start, an update's handler, both replayed by newer code) fills in today's defaults; for a spec accepted before a
// default existed that would change what its objects look like, and a Ferry upgrade would roll out its engine. So a
// document that does not name such a field gets the old behaviour unless it is new: a start or an update that this
// code is the first to see (`patched`, so that a replay decides the same way).
import type { ServedModel } from './contract/index.js';

/** The spec as parsed, with each later default turned back to its old behaviour where the document is not new. */
export function withAcceptedDefaults(doc: unknown, model: ServedModel, isNew: () => boolean): ServedModel {
  const scheduling = (doc as { spec?: { scheduling?: unknown } } | undefined)?.spec?.scheduling;
  // scheduling.colocateReplicas (2026-12, default true): false is the pod template specs had before it.
  const named = typeof scheduling === 'object' && scheduling !== null && 'colocateReplicas' in scheduling;
  if (named || isNew()) return model;
  return { ...model, spec: { ...model.spec, scheduling: { ...model.spec.scheduling, colocateReplicas: false } } };
}
