// Kubernetes name rules the CLI's argument parser shares with the schema. Zod-free on purpose: the parser imports
// this file directly, so that `ferry --help` and `--version` load no schema (docs/performance.md#cli-start).
import { quote } from './text.js';

/** A DNS-1123 label: a namespace, a model name, a cluster name (at most 63 characters, checked apart). */
export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_NAME_PART = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

export function isSubdomain(value: string): boolean {
  return value.length <= 253 && DNS1123_SUBDOMAIN.test(value);
}

/** A Kubernetes qualified name (`team`, `example.com/team`): label keys, toleration keys, resource names. */
export function qualifiedNameProblem(value: string, requirePrefix = false): string | undefined {
  const slash = value.lastIndexOf('/');
  const prefix = slash >= 0 ? value.slice(0, slash) : undefined;
  const name = slash >= 0 ? value.slice(slash + 1) : value;
  if (requirePrefix && prefix === undefined) return 'needs a domain prefix';
  if (prefix !== undefined && !isSubdomain(prefix)) return `its prefix ${quote(prefix)} is not a DNS subdomain`;
  if (name.length === 0 || name.length > 63 || !LABEL_NAME_PART.test(name)) {
    return 'its name part must be 1-63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit';
  }
  return undefined;
}

/** Why `value` cannot be a label value (empty is one), or undefined. */
export function labelValueProblem(value: string): string | undefined {
  if (value === '') return undefined;
  if (value.length > 63 || !LABEL_NAME_PART.test(value)) {
    return 'must be at most 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit';
  }
  return undefined;
}
