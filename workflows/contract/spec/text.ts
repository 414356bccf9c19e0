// Characters that must not reach a Kubernetes object, a process argument or a terminal, and how values are echoed
// in messages: escaped and clipped. Pure.

/** What is wrong with one character of a string: its kind, code (`U+001B`) and index. */
export interface UnsafeCharacter {
  kind: 'control' | 'bidi' | 'surrogate';
  code: string;
  position: number;
}

// The characters, as one regular expression class: C0 controls, DEL, C1 controls, bidi marks, overrides and
// isolates, and surrogates. With the `u` flag a well-formed pair is one character outside the class, so only a lone
// surrogate matches. The JSON Schema's `pattern` for strings is built from the same class (`PRINTABLE`).
const UNSAFE_CLASS = '\\u0000-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069\\ud800-\\udfff';
const UNSAFE = new RegExp(`[${UNSAFE_CLASS}]`, 'u');
const UNSAFE_ALL = new RegExp(`[${UNSAFE_CLASS}]`, 'gu');

/** One character no rule refuses as unsafe, for patterns that otherwise admit any character. */
export const PRINTABLE_CHARACTER = `[^${UNSAFE_CLASS}]`;
/** A string without an unsafe character: what every string of a document must be. */
export const PRINTABLE = new RegExp(`^${PRINTABLE_CHARACTER}*$`, 'u');

const codeOf = (unit: number): string => `U+${unit.toString(16).toUpperCase().padStart(4, '0')}`;

function kindOf(unit: number): UnsafeCharacter['kind'] {
  if (unit >= 0xd800 && unit <= 0xdfff) return 'surrogate';
  return unit < 0x20 || (unit >= 0x7f && unit <= 0x9f) ? 'control' : 'bidi';
}

/** The first C0/C1 control, DEL, bidi override or isolate, or lone surrogate in `text`. */
export function unsafeCharacter(text: string): UnsafeCharacter | undefined {
  const match = UNSAFE.exec(text);
  if (!match) return undefined;
  const unit = text.charCodeAt(match.index);
  return { kind: kindOf(unit), code: codeOf(unit), position: match.index };
}

const DESCRIPTION: Record<UnsafeCharacter['kind'], string> = {
  control: 'a control character',
  bidi: 'an invisible bidirectional control character',
  surrogate: 'a lone surrogate',
};

/** `contains a control character (U+001B) at position 3` (positions count from 0). */
export function unsafeCharacterMessage(found: UnsafeCharacter): string {
  return `contains ${DESCRIPTION[found.kind]} (${found.code}) at position ${found.position}`;
}

/** `text` with every unsafe character written as `\uXXXX`, so it prints as what it is. */
export function printable(text: string): string {
  return text.replace(UNSAFE_ALL, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

const QUOTE_WHOLE = 48;
const QUOTE_KEEP = 40;

/** A value as a message shows it: JSON, escaped, and clipped with its length: `"aaaa…" (5242880 characters)`. */
export function quote(value: unknown): string {
  if (typeof value === 'string' && value.length > QUOTE_WHOLE) {
    return `${printable(JSON.stringify(`${value.slice(0, QUOTE_KEEP)}…`))} (${value.length} characters)`;
  }
  const json = JSON.stringify(value) as string | undefined;
  if (json === undefined) return String(value);
  return typeof value === 'string' ? printable(json) : clip(printable(json), QUOTE_WHOLE * 2);
}

const utf8Bytes = (unit: number): number =>
  unit < 0x80 ? 1 : unit < 0x800 || (unit >= 0xd800 && unit <= 0xdfff) ? 2 : 3;

/** `text` cut to at most `maxBytes` bytes of UTF-8, ending with `…` (3 of them) when cut. */
export function clip(text: string, maxBytes: number): string {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) bytes += utf8Bytes(text.charCodeAt(i));
  if (bytes <= maxBytes) return text;
  let end = 0;
  for (bytes = 3; end < text.length && bytes + utf8Bytes(text.charCodeAt(end)) <= maxBytes; end++) {
    bytes += utf8Bytes(text.charCodeAt(end));
  }
  // Never half of a surrogate pair: that would be a lone surrogate.
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}…`;
}
