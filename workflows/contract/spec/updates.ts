// What an update may change on a running model, and which fields it changes. Pure.
import { parseServedModel, SpecError, type SpecIssue } from './parse.js';
import { parseQuantity } from './quantities.js';
import { quote } from './rules.js';
import type { ServedModel } from './schema.js';
import { describeSource, sameSource, sourceSecret } from './source.js';

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Equality of JSON values that ignores key order. */
export function sameJson(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => sameJson(item, b[i]));
  }
  if (isObject(a) || isObject(b)) {
    if (!isObject(a) || !isObject(b)) return false;
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].every((key) => sameJson(a[key], b[key]));
  }
  return a === b;
}

/** What the engine's pods run, but for the adapters, which are loaded in place (docs/design/rollout.md, section 1). */
const podFields = (m: ServedModel) => ({
  engine: { ...m.spec.engine, lora: { ...m.spec.engine.lora, adapters: undefined } },
  resources: m.spec.resources,
  scheduling: m.spec.scheduling,
});

/**
 * True when `next` is a new revision of the model: other weights, or other engine pods (`engine` but its adapters,
 * `resources`, `scheduling`). Every other change applies to the revision in place.
 */
export function newRevision(previous: ServedModel, next: ServedModel): boolean {
  return !sameSource(previous.spec.source, next.spec.source) || !sameJson(podFields(previous), podFields(next));
}

/**
 * `current` with `earlier`'s revision: its weights and engine pods (`engine` but the adapters, `resources`,
 * `scheduling`); every other field (the rollout, the front, scaling, the adapters) stays `current`'s. What an undo
 * applies.
 */
export function withRevisionOf(current: ServedModel, earlier: ServedModel): ServedModel {
  const { adapters: _theirs, ...lora } = earlier.spec.engine.lora;
  const { adapters } = current.spec.engine.lora;
  return {
    ...current,
    spec: {
      ...current.spec,
      source: earlier.spec.source,
      engine: { ...earlier.spec.engine, lora: adapters ? { ...lora, adapters } : lora },
      resources: earlier.spec.resources,
      scheduling: earlier.spec.scheduling,
    },
  };
}

/** Dotted paths of what differs, down to the objects' leaves (lists count as one value): `spec.engine.args`. */
export function specChanges(previous: ServedModel, next: ServedModel): string[] {
  const changes: string[] = [];
  const walk = (a: unknown, b: unknown, path: string): void => {
    if (sameJson(a, b)) return;
    if (isObject(a) && isObject(b) && path.split('.').length < 4) {
      for (const key of new Set([...Object.keys(a), ...Object.keys(b)]))
        walk(a[key], b[key], path ? `${path}.${key}` : key);
      return;
    }
    changes.push(path);
  };
  walk(previous, next, '');
  return changes;
}

const IMMUTABLE: { path: string; get: (m: ServedModel) => unknown; why: string }[] = [
  { path: 'metadata.name', get: (m) => m.metadata.name, why: 'it is the identity of the model' },
  { path: 'metadata.namespace', get: (m) => m.metadata.namespace, why: 'it is the identity of the model' },
  { path: 'spec.cluster', get: (m) => m.spec.cluster, why: 'the model is served by that cluster’s worker' },
  {
    path: 'spec.storage.storageClassName',
    get: (m) => m.spec.storage.storageClassName,
    why: 'Kubernetes cannot change the class of an existing volume',
  },
  {
    path: 'spec.storage.accessMode',
    get: (m) => m.spec.storage.accessMode,
    why: 'Kubernetes cannot change the access mode of an existing volume',
  },
  {
    path: 'spec.storage.cache',
    get: (m) => m.spec.storage.cache ?? 'none',
    why: "the model's weights do not move between a volume of its own and a shared one",
  },
  {
    // Unset unless shared: the source (and the Secret that reads it) names the cache the model is on.
    path: 'spec.source',
    get: (m) => (m.spec.storage.cache === 'shared' ? sharedSource(m) : undefined),
    why: 'a model on a shared cache does not move to another source’s cache yet',
  },
];

/** The source of a model on a shared cache as its cache is keyed: the source and the Secret that reads it. */
function sharedSource(m: ServedModel): string {
  const { source } = m.spec;
  const secret = sourceSecret(source);
  return `${describeSource(source)}${secret ? ` read with Secret ${secret}` : ''}`;
}

/** Paths of fields that cannot change on a running model (a shrinking `spec.storage.size` counts: volumes only grow). */
export function immutableChanges(old: ServedModel, next: ServedModel): string[] {
  const paths = IMMUTABLE.filter((field) => field.get(old) !== field.get(next)).map((field) => field.path);
  // The source counts only on a shared cache before and after: a change of the cache itself is the one to name.
  const changed = paths.includes('spec.storage.cache') ? paths.filter((p) => p !== 'spec.source') : paths;
  const oldSize = parseQuantity(old.spec.storage.size);
  const nextSize = parseQuantity(next.spec.storage.size);
  if (oldSize !== undefined && nextSize !== undefined && nextSize < oldSize) changed.push('spec.storage.size');
  return changed;
}

/**
 * A model's workflow serves a document that names its cluster: `spec.placement` is the client library's to resolve
 * (it serves the document with `spec.cluster` the cluster chosen, and without placement) before the workflow starts.
 */
export function placementIssue(model: ServedModel): SpecIssue | undefined {
  if (!model.spec.placement) return undefined;
  return {
    path: 'spec.placement',
    message:
      "is resolved before a model's workflow starts: serve or apply the document with Ferry's client (ferry serve, ferry apply, serveModel, applyModel), which chooses the cluster, or name the cluster in spec.cluster",
  };
}

/** Validates `doc` as the next spec of the running model `current`; throws `SpecError` on any problem. */
export function specForUpdate(current: ServedModel, doc: unknown): ServedModel {
  const next = parseServedModel(doc);
  const placed = placementIssue(next);
  if (placed) throw new SpecError([placed]);
  const issues = immutableChanges(current, next).map((path): SpecIssue => {
    if (path === 'spec.storage.size') {
      return {
        path,
        message: `cannot shrink from ${current.spec.storage.size} to ${next.spec.storage.size}: volumes only grow`,
      };
    }
    const field = IMMUTABLE.find((f) => f.path === path)!;
    return {
      path,
      message: `cannot change from ${quote(field.get(current))} to ${quote(field.get(next))}: ${field.why}; delete the model and serve it again instead`,
    };
  });
  if (issues.length > 0) throw new SpecError(issues);
  return next;
}
