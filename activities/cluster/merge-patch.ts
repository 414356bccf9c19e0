// Whether an object already reads as a JSON merge patch would leave it: how Cluster.mergePatch (api.ts) tells that an
// attempt whose outcome was unknown took effect, so a repeat is not needed.

/** Whether `obj` already reads as `patch` would leave it (RFC 7386: null removes a field, objects merge). */
export function holdsMergePatch(obj: unknown, patch: unknown): boolean {
  if (!isPlainObject(patch)) return sameValue(obj, patch);
  if (!isPlainObject(obj)) return false;
  return Object.entries(patch).every(([key, value]) =>
    value === null ? obj[key] === undefined || obj[key] === null : holdsMergePatch(obj[key], value),
  );
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Date);

/** Equal as JSON values, whatever the key order; client-node reads timestamps as Dates, patches carry strings. */
function sameValue(a: unknown, b: unknown): boolean {
  if (a instanceof Date || b instanceof Date)
    return new Date(a as string).getTime() === new Date(b as string).getTime();
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => sameValue(v, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = (o: Record<string, unknown>) => Object.keys(o).filter((k) => o[k] !== undefined);
    const ka = keys(a);
    return ka.length === keys(b).length && ka.every((k) => sameValue(a[k], b[k]));
  }
  return a === b;
}
