// Which fields an update changes: shown to the person who sent it, and the reason a generation moves.
import type { ServedModel } from './spec';

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
