// Durations (`90s`, `1h30m`) and Kubernetes quantities (`50Gi`, `500m`) as the spec writes them. Pure.
const DURATION_UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION_BODY = '\\s*(?:\\d+(?:\\.\\d+)?(?:ms|s|m|h|d))+\\s*';
/** A duration as written: amounts with units, one after another; spaces around it are ignored. */
export const DURATION = new RegExp(`^${DURATION_BODY}$`, 'u');
/** A duration above 0 as written: one of its amounts has a digit other than 0 (a unit has none). */
export const NONZERO_DURATION = new RegExp(`^(?=[\\s\\S]*[1-9])${DURATION_BODY}$`, 'u');
const DURATION_PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;

/** Parses `90s`, `40m`, `2h`, `1h30m`, `500ms`, `1d` into milliseconds; throws on anything else. */
export function parseDuration(text: string): number {
  if (!DURATION.test(text)) {
    throw new Error(`invalid duration ${JSON.stringify(text)}: write a number and a unit, like 90s, 40m, 2h or 1h30m`);
  }
  let ms = 0;
  for (const [, amount, unit] of text.matchAll(DURATION_PART)) {
    ms += Number(amount) * (DURATION_UNIT_MS[unit!] ?? 0);
  }
  return Math.round(ms);
}

/** A duration in whole seconds, rounded up (Kubernetes fields such as `activeDeadlineSeconds`). */
export function durationSeconds(text: string): number {
  return Math.ceil(parseDuration(text) / 1000);
}

const AMOUNT = '(?:\\d+(?:\\.\\d*)?|\\.\\d+)';
const SUFFIX = '(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\\d+)';
/** A Kubernetes quantity as written: a signed decimal with an optional suffix (binary, decimal or an exponent). */
export const QUANTITY = new RegExp(`^([+-]?${AMOUNT})${SUFFIX}?$`, 'u');
/** A quantity above 0 as written: no minus sign, and a digit other than 0 before its suffix. */
export const POSITIVE_QUANTITY = new RegExp(`^\\+?(?=[\\d.]*[1-9])${AMOUNT}${SUFFIX}?$`, 'u');
const QUANTITY_SUFFIX: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/** The value of a Kubernetes quantity (`50Gi`, `500m`, `4`, `1e3`) in base units, or undefined if malformed. */
export function parseQuantity(text: string): number | undefined {
  const match = QUANTITY.exec(text);
  if (!match) return undefined;
  const [, amount, suffix] = match;
  const factor = suffix === undefined ? 1 : (QUANTITY_SUFFIX[suffix] ?? 10 ** Number(suffix.slice(1)));
  return Number(amount) * factor;
}
