// Characters that must not reach a Kubernetes object, a process argument or a terminal, and how values are echoed
// in messages: escaped and clipped. Pure.

/** What is wrong with one character of a string: its kind, code (`U+001B`) and index. */
export interface UnsafeCharacter {
  kind: 'control' | 'bidi' | 'surrogate';
  code: string;
  position: number;
}

const BIDI = new Set([0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069]);

const codeOf = (unit: number): string => `U+${unit.toString(16).toUpperCase().padStart(4, '0')}`;

function unsafeKind(text: string, i: number): UnsafeCharacter['kind'] | undefined {
  const unit = text.charCodeAt(i);
  if (unit < 0x20 || (unit >= 0x7f && unit <= 0x9f)) return 'control';
  if (BIDI.has(unit)) return 'bidi';
  if (unit >= 0xd800 && unit <= 0xdbff) {
    const next = text.charCodeAt(i + 1);
    return next >= 0xdc00 && next <= 0xdfff ? undefined : 'surrogate';
  }
  if (unit >= 0xdc00 && unit <= 0xdfff) {
    const previous = text.charCodeAt(i - 1);
    return previous >= 0xd800 && previous <= 0xdbff ? undefined : 'surrogate';
  }
  return undefined;
}

/** The first C0/C1 control, DEL, bidi override or isolate, or lone surrogate in `text`. */
export function unsafeCharacter(text: string): UnsafeCharacter | undefined {
  for (let i = 0; i < text.length; i++) {
    const kind = unsafeKind(text, i);
    if (kind) return { kind, code: codeOf(text.charCodeAt(i)), position: i };
  }
  return undefined;
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
  if (!unsafeCharacter(text)) return text;
  let out = '';
  for (let i = 0; i < text.length; i++) {
    out += unsafeKind(text, i) ? `\\u${text.charCodeAt(i).toString(16).padStart(4, '0')}` : text[i];
  }
  return out;
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
