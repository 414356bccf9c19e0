// What a document must be before any field rule reads it: plain data (what YAML and JSON give), bounded in size and
// depth, every string printable. Checked once for every string of the document, keys included. Pure.
import { quote, unsafeCharacter, unsafeCharacterMessage } from './text.js';

/** How big a ServedModel document may be; one with every field set has about 150 values and 3,000 characters. */
export const DOCUMENT_LIMITS = {
  /** Characters of YAML text, and of all strings of a document together (keys included). */
  characters: 256 * 1024,
  /** Strings, numbers, booleans, nulls, lists and mappings, each counted wherever it appears. */
  values: 1000,
  /** Lists and mappings inside each other; the document itself is level 1. */
  depth: 64,
} as const;

type Path = (string | number)[];

/** A problem of the document as data, at a path of keys and indexes. */
interface DataProblem {
  path: Path;
  message: string;
}

/** A copy of the document made of plain objects, arrays and scalars, or (`data` undefined) why none can be made. */
export interface PlainDocument {
  data?: unknown;
  problems: DataProblem[];
}

const TOO_LARGE = `a ServedModel document is at most ${DOCUMENT_LIMITS.characters} characters (256 KiB)`;
const PLAIN = 'must be plain data (a string, number, boolean, null, list or mapping)';

/** Objects and arrays of any realm (the workflow sandbox has its own `Object.prototype`); no class instances. */
function isPlainObject(value: object): boolean {
  if (Object.prototype.toString.call(value) !== '[object Object]') return false;
  const proto = Object.getPrototypeOf(value) as object | null;
  return proto === null || Object.getPrototypeOf(proto) === null;
}

function kindOf(value: object): string {
  const tag = Object.prototype.toString.call(value).slice(8, -1);
  return tag === 'Object' ? 'an instance of a class' : `a ${tag}`;
}

/**
 * Copies `doc` as plain data, so the rules read each value once, and reports what no rule should have to read:
 * values that are not plain data, cycles, too much nesting, too many values or characters (these stop the copy),
 * and strings with control, bidi or lone surrogate characters (these do not).
 */
export function plainDocument(doc: unknown): PlainDocument {
  const problems: DataProblem[] = [];
  const path: Path = [];
  const ancestors = new Set<object>();
  let values = 0;
  let characters = 0;
  let stopped = false;

  const stop = (message: string, at: Path = [...path]): undefined => {
    problems.push({ path: at, message });
    stopped = true;
    return undefined;
  };

  const checkText = (text: string, key: boolean): void => {
    characters += text.length;
    if (text.length > DOCUMENT_LIMITS.characters) {
      stop(`${key ? 'its key ' : ''}is too long: ${quote(text)}; ${TOO_LARGE}`);
    } else if (characters > DOCUMENT_LIMITS.characters) {
      stop(`is too large: its strings add up to more than ${DOCUMENT_LIMITS.characters} characters (256 KiB)`, []);
    } else {
      const found = unsafeCharacter(text);
      if (found)
        problems.push({ path: [...path], message: `${key ? 'its key ' : ''}${unsafeCharacterMessage(found)}` });
    }
  };

  const copy = (value: unknown, depth: number): unknown => {
    if (++values > DOCUMENT_LIMITS.values) {
      return stop(
        `is too large: more than ${DOCUMENT_LIMITS.values} values (one with every field set has about 150)`,
        [],
      );
    }
    switch (typeof value) {
      case 'string':
        checkText(value, false);
        return value;
      case 'number':
      case 'boolean':
      case 'undefined':
        return value;
      case 'object':
        break;
      default:
        return stop(`${PLAIN}, got a ${typeof value}`);
    }
    if (value === null) return null;
    if (ancestors.has(value)) return stop('contains itself: a document is a tree of values, without cycles');
    if (depth > DOCUMENT_LIMITS.depth) {
      return stop(`nests lists and mappings more than ${DOCUMENT_LIMITS.depth} levels deep`);
    }
    if (!Array.isArray(value) && !isPlainObject(value)) return stop(`${PLAIN}, got ${kindOf(value)}`);
    ancestors.add(value);
    const out = Array.isArray(value) ? copyList(value, depth) : copyMapping(value as Record<string, unknown>, depth);
    ancestors.delete(value);
    return out;
  };

  const copyList = (list: unknown[], depth: number): unknown[] => {
    const out: unknown[] = [];
    for (let i = 0; i < list.length && !stopped; i++) {
      path.push(i);
      out.push(copy(list[i], depth + 1));
      path.pop();
    }
    return out;
  };

  const copyMapping = (mapping: Record<string, unknown>, depth: number): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(mapping)) {
      path.push(key);
      checkText(key, true);
      // defineProperty: a key "__proto__" stays a key (and is reported as unknown), it does not set a prototype.
      if (!stopped)
        Object.defineProperty(out, key, {
          value: copy(mapping[key], depth + 1),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      path.pop();
      if (stopped) break;
    }
    return out;
  };

  const data = copy(doc, 1);
  return stopped ? { problems } : { data, problems };
}
