// The building blocks of the schema: field rules that word their own messages for people. Pure.
import { z } from 'zod';
import { NONZERO_DURATION, parseDuration, parseQuantity, POSITIVE_QUANTITY } from './quantities.js';
import {
  DNS1123_LABEL,
  DNS1123_SUBDOMAIN,
  isSubdomain,
  LABEL_MAX,
  LABEL_VALUE,
  labelValueProblem,
  PREFIXED_NAME,
  QUALIFIED_NAME,
  qualifiedNameProblem,
  SUBDOMAIN_BODY,
  SUBDOMAIN_MAX,
  whole,
} from './names.js';
import { acceptedBefore } from './accepted-before.js';
import { parserOnly, type ParserOnlyRule } from './parser-only.js';
import { quote } from './text.js';

export { DNS1123_LABEL, qualifiedNameProblem, quote };

/** A refusal for a rule only the parser checks (parser-only.ts): its message and the rule's name. */
interface ParserOnlyRefusal {
  message: string;
  rule: ParserOnlyRule;
}

type Rule<T> = (value: T) => string | ParserOnlyRefusal | undefined;

export function rules<S extends z.ZodType>(schema: S, ...checks: Rule<z.output<S>>[]): S {
  return schema.superRefine((value, ctx) => {
    for (const check of checks) {
      const refusal = check(value);
      if (typeof refusal === 'string') ctx.addIssue({ code: 'custom', message: refusal });
      else if (refusal) ctx.addIssue({ code: 'custom', message: refusal.message, params: parserOnly(refusal.rule) });
      if (refusal) return;
    }
  });
}

export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'string') return quote(value);
  switch (typeof value) {
    case 'number':
    case 'boolean':
    case 'bigint':
      return String(value);
    case 'undefined':
      return 'undefined';
    default:
      return `a ${typeof value}`;
  }
}

/** An error function for literals and enums: `must be one of A, B, got "C"`, or `is required (A)`. */
export function mustBe(...allowed: string[]) {
  const expected = allowed.length === 1 ? allowed[0] : `one of ${allowed.join(', ')}`;
  return (issue: { input?: unknown }) =>
    issue.input === undefined ? `is required (${expected})` : `must be ${expected}, got ${describeValue(issue.input)}`;
}

function unknownFieldMessage(key: string, known: readonly string[]): string {
  // Only a short key can be a typo of a field name; comparing a huge one would cost its length times theirs.
  const close =
    key.length > 64
      ? undefined
      : known.find((candidate) => {
          const distance = editDistance(candidate.toLowerCase(), key.toLowerCase());
          return distance <= 2 && distance < key.length / 2;
        });
  const hint = close ? `did you mean ${quote(close)}? ` : '';
  return `unknown field; ${hint}fields allowed here: ${known.join(', ')}`;
}

// An object that rejects unknown keys. zod reports all unknown keys of one object as one issue; the messages are
// joined by newlines here and split per key in `toSpecIssues`, so each key gets its own path and hint.
export function strict<T extends z.core.$ZodLooseShape>(shape: T) {
  const known = Object.keys(shape);
  return z.strictObject(shape, {
    error: (issue) =>
      issue.code === 'unrecognized_keys'
        ? issue.keys.map((key) => unknownFieldMessage(key, known)).join('\n')
        : undefined,
  });
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(above + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}

// Each rule a pattern can say is one regular expression, tested by the rule here and copied into the JSON Schema as
// its `pattern` (`.meta()`, read by deploy/schema/spec-schema.ts), so the parser and editors agree. They carry the
// `u` flag, as JSON Schema validators compile patterns; a rule's words come from code that explains a refusal.
/** The keywords a rule gives the JSON Schema: its pattern's source and its bounds. */
export const jsonRule = (pattern: RegExp, bounds: { minLength?: number; maxLength?: number } = {}) => ({
  pattern: pattern.source,
  ...bounds,
});

const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/u;
const OPTIONAL_SUBDOMAIN = whole(`(?:${SUBDOMAIN_BODY})?`);
export const C_IDENTIFIER_BODY = '[A-Za-z_][A-Za-z0-9_]*';
export const C_IDENTIFIER = whole(C_IDENTIFIER_BODY);
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/u;
const SECRET_KEY_MAX = 253;
// A Hugging Face model id ([owner/]name), without "--" or ".." anywhere.
export const HF_MODEL_ID =
  /^(?!.*(?:--|\.\.))(?:[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9])?\/)?[A-Za-z0-9](?:[\w.-]*[A-Za-z0-9])?$/u;
export const HF_MODEL_ID_MAX = 96;
// git's rules for ref names, which the Hub's revisions follow: parts of letters, digits, "_", "-" and ".", split by
// "/", none empty or starting with "."; not starting with "-", no "..", not ending with "." or a part with ".lock".
const REVISION = /^(?!-)(?!.*\.\.)(?!.*\.$)(?!.*\.lock(?:\/|$))[\w-][\w.-]*(?:\/[\w-][\w.-]*)*$/u;
const REVISION_MAX = 255;

/** A revision (a branch, tag or commit) as a JSON Schema says it. */
export const revisionRule = () => jsonRule(REVISION, { maxLength: REVISION_MAX });

/** Why `value` cannot be a branch, tag or commit (git's rules for ref names, which the Hub's revisions follow). */
export function revisionProblem(value: string): string | undefined {
  if (value.length <= REVISION_MAX && REVISION.test(value)) return undefined;
  if (value.length === 0) return 'it is empty';
  if (value.length > REVISION_MAX) return `it is longer than ${REVISION_MAX} characters`;
  if (!/^[\w./-]+$/.test(value)) return 'it may only have letters, digits, "_", "-", "." and "/"';
  if (value.startsWith('-')) return 'it starts with "-", which a program reads as an option';
  const parts = value.split('/');
  if (parts.includes('')) return 'it starts or ends with "/", or has "//"';
  if (parts.some((part) => part.startsWith('.'))) return 'a part of it starts with "." (like ".." or ".git")';
  if (value.includes('..')) return 'it has ".." in it';
  return 'it or a part of it ends with "." or ".lock"';
}

/** A StorageClass: empty (the cluster's default) or a DNS subdomain. */
export const storageClassRule = {
  test: (value: string) => value.length <= SUBDOMAIN_MAX && OPTIONAL_SUBDOMAIN.test(value),
  json: jsonRule(OPTIONAL_SUBDOMAIN, { maxLength: SUBDOMAIN_MAX }),
};

/** The JSON Schema of a qualified name; with `requirePrefix`, one with a domain prefix. */
export const qualifiedNameRule = (requirePrefix = false) => jsonRule(requirePrefix ? PREFIXED_NAME : QUALIFIED_NAME);

export const labelMap = (what: string) =>
  z
    .record(z.string().meta(jsonRule(QUALIFIED_NAME)), z.string().meta(jsonRule(LABEL_VALUE)))
    .superRefine((labels, ctx) => {
      for (const [key, value] of Object.entries(labels)) {
        const keyProblem = qualifiedNameProblem(key);
        if (keyProblem) {
          ctx.addIssue({
            code: 'custom',
            path: [key],
            message: `${quote(key)} is not a valid ${what} key: ${keyProblem}`,
          });
        }
        const valueProblem = labelValueProblem(value);
        if (valueProblem) ctx.addIssue({ code: 'custom', path: [key], message: `${what} value ${valueProblem}` });
      }
    });

/** A label key (`team`, `topology.kubernetes.io/zone`), as Kubernetes checks one. */
export const labelKey = (example: string) =>
  rules(z.string(), (v) => {
    const problem = qualifiedNameProblem(v);
    return problem ? `must be a label key like ${example}, got ${quote(v)} (${problem})` : undefined;
  }).meta(qualifiedNameRule());

// What Kubernetes requires of a selector requirement's values, by its operator: how many, and of what form. The
// parser's check and the JSON Schema's if/then (`requirementValuesJson`) both read this table.
const WHOLE_NUMBER = /^-?\d{1,18}$/u;
interface ValuesRule {
  minItems?: number;
  maxItems?: number;
  pattern?: RegExp;
  problem: (operator: string, values: readonly string[]) => string;
}
const SOME_VALUES: ValuesRule = {
  minItems: 1,
  problem: (operator) => `must list at least one value when operator is ${operator}`,
};
const NO_VALUES: ValuesRule = { maxItems: 0, problem: (operator) => `must be empty when operator is ${operator}` };
const ONE_NUMBER: ValuesRule = {
  minItems: 1,
  maxItems: 1,
  pattern: WHOLE_NUMBER,
  problem: (operator, values) =>
    `must be one whole number when operator is ${operator}, like ["8"], got ${quote(values)}`,
};
const REQUIREMENT_VALUES: Readonly<Record<string, ValuesRule>> = {
  In: SOME_VALUES,
  NotIn: SOME_VALUES,
  Exists: NO_VALUES,
  DoesNotExist: NO_VALUES,
  Gt: ONE_NUMBER,
  Lt: ONE_NUMBER,
};

/** What Kubernetes requires of a selector requirement's values for its operator, or undefined when they fit. */
export function requirementValuesProblem(operator: string, values: readonly string[] = []): string | undefined {
  const rule = REQUIREMENT_VALUES[operator];
  if (!rule) return undefined;
  const fits =
    values.length >= (rule.minItems ?? 0) &&
    values.length <= (rule.maxItems ?? Infinity) &&
    values.every((value) => rule.pattern?.test(value) ?? true);
  return fits ? undefined : rule.problem(operator, values);
}

/** The JSON Schema of the same rule, for a requirement with these operators: an if/then per operator. */
export function requirementValuesJson(operators: readonly string[]) {
  return {
    allOf: operators.flatMap((operator) => {
      const rule = REQUIREMENT_VALUES[operator];
      if (!rule) return [];
      const values = {
        type: 'array',
        ...(rule.minItems === undefined ? {} : { minItems: rule.minItems }),
        ...(rule.maxItems === undefined ? {} : { maxItems: rule.maxItems }),
        ...(rule.pattern ? { items: { type: 'string', pattern: rule.pattern.source } } : {}),
      };
      return [
        {
          if: { required: ['operator'], properties: { operator: { const: operator } } },
          then: { ...(rule.minItems ? { required: ['values'] } : {}), properties: { values } },
        },
      ];
    }),
  };
}

const RESERVED_MODEL_NAME = 'vllm';

export const modelName = rules(
  z.string(),
  (v) => (v.length === 0 ? 'must not be empty' : undefined),
  (v) =>
    v.length > LABEL_MAX ? `must be at most 63 characters (it names a Kubernetes Service), got ${v.length}` : undefined,
  (v) =>
    DNS1035_LABEL.test(v)
      ? undefined
      : `must be a DNS-1035 label: lowercase letters, digits and "-", starting with a letter and ending with a letter or digit (like qwen-7b), got ${quote(v)}`,
  (v) =>
    v === RESERVED_MODEL_NAME
      ? 'must not be "vllm": a Service named vllm injects VLLM_* variables into pods that collide with vLLM\'s own settings; pick another name'
      : undefined,
).meta({ ...jsonRule(DNS1035_LABEL, { maxLength: LABEL_MAX }), not: { const: RESERVED_MODEL_NAME } });

export const dnsLabel = (what: string, example: string) =>
  rules(z.string(), (v) =>
    v.length <= LABEL_MAX && DNS1123_LABEL.test(v)
      ? undefined
      : `must be a ${what}: at most 63 lowercase letters, digits and "-", starting and ending with a letter or digit (like ${example}), got ${quote(v)}`,
  ).meta(jsonRule(DNS1123_LABEL, { maxLength: LABEL_MAX }));

export const objectName = (what: string, example: string) =>
  rules(z.string(), (v) =>
    isSubdomain(v)
      ? undefined
      : `must be the name of a ${what}: lowercase letters, digits, "-" and ".", like ${example}, got ${quote(v)}`,
  ).meta(jsonRule(DNS1123_SUBDOMAIN, { maxLength: SUBDOMAIN_MAX }));

export const secretRef = (example: string) =>
  strict({
    name: objectName('Secret', example),
    key: rules(z.string(), (v) =>
      v.length <= SECRET_KEY_MAX && SECRET_KEY.test(v)
        ? undefined
        : `must be a key of the Secret (letters, digits, "-", "_" or "."), got ${quote(v)}`,
    )
      .meta(jsonRule(SECRET_KEY, { maxLength: SECRET_KEY_MAX }))
      .default('token'),
  });

export const quantity = (example: string) =>
  z
    // A number is read as its string, which always fits the pattern: only its value counts.
    .union(
      [z.string().meta(jsonRule(POSITIVE_QUANTITY)), z.number().meta({ exclusiveMinimum: 0, maximum: MAX_QUANTITY })],
      {
        error: (issue) => `must be a positive quantity like ${example}, got ${describeValue(issue.input)}`,
      },
    )
    .transform((v) => String(v))
    .pipe(
      rules(z.string(), (v) => {
        const value = parseQuantity(v);
        const positive = `must be a positive quantity like ${example}, got ${quote(v)}`;
        if (value === undefined || !POSITIVE_QUANTITY.test(v)) return positive;
        // Above 0 as written, yet too small for a JavaScript number (1e-400): it rounds to 0.
        if (!(value > 0)) return { message: positive, rule: 'quantity-range' };
        return value <= MAX_QUANTITY || acceptedBefore('bounds')
          ? undefined
          : {
              message: `must be at most ${MAX_QUANTITY} (2^53 - 1) in its unit, got ${quote(v)}: Kubernetes could not hold it`,
              rule: 'quantity-range',
            };
      }),
    );

/** A longer bound than every duration's, for one field: past `ms`, `message` (the value is added) under `rule`. */
export interface DurationBound {
  ms: number;
  message: string;
  rule: ParserOnlyRule;
}

export const duration = (example: string, bound?: DurationBound) =>
  rules(z.string({ error: `must be a duration like ${example}` }), (v) => {
    let ms: number;
    try {
      ms = parseDuration(v);
    } catch {
      return `must be a duration like 90s, 40m, 2h or 1h30m, got ${quote(v)}`;
    }
    const positive = `must be a positive duration like ${example}, got ${quote(v)}`;
    if (!NONZERO_DURATION.test(v)) return positive;
    // Above 0 as written, yet shorter than half a millisecond (0.1ms): it rounds to 0.
    if (!(ms > 0)) return { message: positive, rule: 'duration-range' };
    if (bound && ms > bound.ms) return { message: `${bound.message}, got ${quote(v)}`, rule: bound.rule };
    return ms <= MAX_DURATION_MS || acceptedBefore('bounds')
      ? undefined
      : {
          message: `must be at most ${MAX_DURATION_DAYS}d, got ${quote(v)}: Kubernetes keeps deadlines as 32-bit seconds, and nothing Ferry waits for takes longer`,
          rule: 'duration-range',
        };
  }).meta(jsonRule(NONZERO_DURATION));

export const int = (what: string) =>
  rules(z.number({ error: `must be ${what}` }).int(`must be ${what}`), (v) =>
    !Number.isSafeInteger(v) || v <= INT32_MAX || acceptedBefore('bounds')
      ? undefined
      : `must be at most ${INT32_MAX} (Kubernetes and vLLM keep it as a 32-bit integer), got ${v}`,
  );

/** The largest whole number Kubernetes' 32-bit fields (replicas, backoffLimit, ports) hold. */
export const INT32_MAX = 2 ** 31 - 1;
/** The longest duration a spec may give: well inside 32-bit seconds, with room for the margins Ferry adds. */
export const MAX_DURATION_DAYS = 3650;
const MAX_DURATION_MS = MAX_DURATION_DAYS * 86_400_000;
/** The largest quantity in its unit: a whole number JavaScript holds exactly, far below Kubernetes' own limit. */
export const MAX_QUANTITY = Number.MAX_SAFE_INTEGER;
