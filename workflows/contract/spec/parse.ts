// Parsing a document: zod's issues in Ferry's words, one per problem with a dotted path. Pure.
import type { z } from 'zod';
import { plainDocument } from './input.js';
import { describeValue } from './rules.js';
import { servedModelSchema, type ServedModel } from './schema.js';
import { clip, printable, quote } from './text.js';

/** One problem in a document: where (`spec.storage.size`) and what is expected. */
export interface SpecIssue {
  path: string;
  message: string;
}

/** Thrown by `parseServedModel`/`specForUpdate`; `message` has one line per issue. */
export class SpecError extends Error {
  override readonly name = 'SpecError';
  readonly issues: SpecIssue[];

  constructor(issues: SpecIssue[]) {
    super(formatSpecIssues(issues));
    this.issues = issues;
  }
}

const LISTED_ISSUES = 20;

/** One line per problem, the first 20 of them: `spec.storage.size: must be a positive quantity like 50Gi, got "lots"`. */
export function formatSpecIssues(issues: readonly SpecIssue[]): string {
  const lines = issues.slice(0, LISTED_ISSUES).map((issue) => `${issue.path}: ${issue.message}`);
  if (issues.length > LISTED_ISSUES) lines.push(`… and ${issues.length - LISTED_ISSUES} more`);
  return lines.join('\n');
}

/** An issue fit to print: no control or bidi characters, path and message together under 1 KB of UTF-8. */
export function boundSpecIssue(issue: SpecIssue): SpecIssue {
  return { path: clip(printable(issue.path), 300), message: clip(printable(issue.message), 700) };
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (typeof segment === 'string' && segment.length <= 48 && /^[A-Za-z_][A-Za-z0-9_]*$/.test(segment))
      out += out ? `.${segment}` : segment;
    else out += `[${quote(String(segment))}]`;
  }
  return out || '(document)';
}

const EXPECTED: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  object: 'an object (a mapping of fields)',
  array: 'a list',
  record: 'a mapping of names to values',
};

// Messages for issues no schema above words itself: missing fields, wrong types, bounds.
const fallbackMessages: z.core.$ZodErrorMap = (issue) => {
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'is required';
      return `must be ${EXPECTED[issue.expected] ?? issue.expected}, got ${describeValue(issue.input)}`;
    case 'too_small':
      return issue.origin === 'array'
        ? `must have at least ${issue.minimum} item(s)`
        : `must be at least ${issue.minimum}`;
    case 'too_big':
      return issue.origin === 'array'
        ? `must have at most ${issue.maximum} item(s)`
        : `must be at most ${issue.maximum}`;
    case 'invalid_value':
      return `must be one of ${issue.values.map((v) => String(v)).join(', ')}, got ${describeValue(issue.input)}`;
    default:
      return undefined;
  }
};

/** Turns zod's issues into Ferry's: one per problem (and per unknown key), with a dotted path. */
export function toSpecIssues(error: z.ZodError): SpecIssue[] {
  const issues: SpecIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      const messages = issue.message.split('\n');
      issue.keys.forEach((key, index) => {
        issues.push(
          boundSpecIssue({ path: formatPath([...issue.path, key]), message: messages[index] ?? messages[0]! }),
        );
      });
    } else {
      issues.push(boundSpecIssue({ path: formatPath(issue.path), message: issue.message }));
    }
  }
  return issues;
}

/**
 * Validates without throwing: the model, or the list of issues. The document is first read as plain data
 * (`plainDocument`): within bounds, every string printable; the field rules then read that copy.
 */
export function safeParseServedModel(
  doc: unknown,
): { ok: true; model: ServedModel } | { ok: false; issues: SpecIssue[] } {
  const plain = plainDocument(doc);
  const issues = plain.problems.map((problem) =>
    boundSpecIssue({ path: formatPath(problem.path), message: problem.message }),
  );
  if (!('data' in plain)) return { ok: false, issues };
  const result = servedModelSchema.safeParse(plain.data, { error: fallbackMessages });
  if (!result.success) issues.push(...toSpecIssues(result.error));
  return issues.length === 0 && result.success ? { ok: true, model: result.data } : { ok: false, issues };
}

/** Validates a document and fills defaults; throws `SpecError` listing every problem. */
export function parseServedModel(doc: unknown): ServedModel {
  const result = safeParseServedModel(doc);
  if (!result.ok) throw new SpecError(result.issues);
  return result.model;
}
