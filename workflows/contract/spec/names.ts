// Kubernetes name rules the CLI's argument parser shares with the schema. Zod-free on purpose: the parser imports
// this file directly, so that `ferry --help` and `--version` load no schema (docs/performance.md#cli-start), and
// so does the CLI's label selector (client/label-selector.ts). Each rule is one regular expression (with the `u`
// flag, as JSON Schema validators compile patterns) that the schema also states (rules.ts); the words of a refusal
// come from code that explains it.
import { quote } from './text.js';

/** A DNS-1123 label: a namespace, a model name, a cluster name (at most 63 characters, checked apart). */
export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/u;

/** A whole-value regular expression from a pattern's body. */
export const whole = (body: string): RegExp => new RegExp(`^(?:${body})$`, 'u');

export const SUBDOMAIN_BODY = '[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*';
const NAME_PART_BODY = '[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?';
/** Kubernetes' longest label (a name part, a label value, a DNS label): 63 characters. */
export const LABEL_MAX = 63;
export const SUBDOMAIN_MAX = 253;
export const DNS1123_SUBDOMAIN = whole(SUBDOMAIN_BODY);
// A qualified name: an optional DNS subdomain prefix of at most 253 characters and "/", then a name part of 1-63.
const qualified = (prefix: '' | '?') =>
  whole(`(?:(?=[^/]{1,${SUBDOMAIN_MAX}}/)${SUBDOMAIN_BODY}/)${prefix}(?=[^/]{1,${LABEL_MAX}}$)${NAME_PART_BODY}`);
export const QUALIFIED_NAME = qualified('?');
export const PREFIXED_NAME = qualified('');
export const LABEL_VALUE = whole(`(?:(?=[^]{1,${LABEL_MAX}}$)${NAME_PART_BODY})?`);

export function isSubdomain(value: string): boolean {
  return value.length <= SUBDOMAIN_MAX && DNS1123_SUBDOMAIN.test(value);
}

/** A Kubernetes qualified name (`team`, `example.com/team`): label keys, toleration keys, resource names. */
export function qualifiedNameProblem(value: string, requirePrefix = false): string | undefined {
  if ((requirePrefix ? PREFIXED_NAME : QUALIFIED_NAME).test(value)) return undefined;
  const slash = value.lastIndexOf('/');
  const prefix = slash >= 0 ? value.slice(0, slash) : undefined;
  if (requirePrefix && prefix === undefined) return 'needs a domain prefix';
  if (prefix !== undefined && !isSubdomain(prefix)) return `its prefix ${quote(prefix)} is not a DNS subdomain`;
  return 'its name part must be 1-63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit';
}

/** Why `value` cannot be a label value (empty is one), or undefined. */
export function labelValueProblem(value: string): string | undefined {
  if (LABEL_VALUE.test(value)) return undefined;
  return 'must be at most 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit';
}
