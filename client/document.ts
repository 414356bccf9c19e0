// ServedModel documents as people write them: YAML (or JSON) text, validated with the workflow's own schema.
import {
  CST,
  isAlias,
  isMap,
  isNode,
  isScalar,
  Lexer,
  LineCounter,
  parseAllDocuments,
  visit,
  type Document,
  type YAMLError,
} from 'yaml';
import {
  boundSpecIssue,
  DOCUMENT_LIMITS,
  expiredProblem,
  safeParseServedModel,
  type ServedModel,
  type SpecIssue,
} from '../workflows/contract/spec/index.js';
import { InvalidSpecError } from './errors.js';

/** Validates a document and fills its defaults; `InvalidSpecError` lists every problem with its field path. */
export function parseModelDocument(doc: unknown): ServedModel {
  const result = safeParseServedModel(doc);
  if (!result.ok) throw new InvalidSpecError(result.issues);
  return result.model;
}

/** `parseModelDocument` for a model that is to serve: an `expiresAt` already past is refused too. */
export function parseServingDocument(doc: unknown): ServedModel {
  const model = parseModelDocument(doc);
  const expired = expiredProblem(model.spec.expiresAt, Date.now());
  if (expired) throw new InvalidSpecError([{ path: 'spec.expiresAt', message: expired }]);
  return model;
}

// YAML 1.2's core schema and nothing else, whatever a %YAML directive says: the tags that make Sets, Maps, Dates or
// bytes (!!set, !!omap, !!timestamp, !!binary) stay unresolved and are reported, `<<` is a plain key. Keys are
// checked for duplicates below, in one pass: the parser's own check compares every key with every other.
const YAML_OPTIONS = {
  schema: 'core',
  version: '1.2',
  resolveKnownTags: false,
  merge: false,
  uniqueKeys: false,
} as const;
const TAG_WARNINGS = new Set(['TAG_RESOLVE_FAILED', 'BAD_COLLECTION_TYPE']);
/** Expansions of aliases toJS may make (yaml's guard against "billion laughs"). */
const MAX_ALIAS_COUNT = 100;
// Lexer tokens (values, punctuation, spaces, comments, newlines): examples/qwen-full.yaml has 534. The parser's time
// grows with them, as with the values: at these bounds it stays well under 100 ms.
const MAX_TOKENS = 8 * DOCUMENT_LIMITS.values;

/** The one YAML document in `text`, as plain data; syntax errors become issues with line and column. */
export function parseModelYaml(text: string): unknown {
  if (text.length > DOCUMENT_LIMITS.characters) {
    invalid({
      path: '(document)',
      message: `is too large: ${text.length} characters, a ServedModel document is at most ${DOCUMENT_LIMITS.characters} (256 KiB)`,
    });
  }
  const shape = shapeProblem(text);
  if (shape) invalid(shape);
  const lineCounter = new LineCounter();
  const docs = parseAllDocuments(text, { ...YAML_OPTIONS, lineCounter });
  if (!Array.isArray(docs) || docs.length === 0) {
    invalid({ path: '(document)', message: 'is empty: expected one ServedModel document' });
  }
  // Of the warnings, the tags: any other (a flow's closing bracket under its key, say) leaves the data as meant.
  const problems = docs.flatMap((d) => [...d.errors, ...d.warnings.filter((w) => TAG_WARNINGS.has(w.code))]);
  if (problems.length > 0) invalid(...problems.map(yamlIssue));
  if (docs.length > 1) {
    invalid({ path: '(document)', message: `has ${docs.length} YAML documents: give one ServedModel per file` });
  }
  const doc = docs[0]!;
  const keys = nodeProblems(doc, lineCounter);
  if (keys.length > 0) invalid(...keys);
  try {
    return doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (err) {
    // yaml throws when aliases expand too far; the walk above leaves nothing else for it to throw on.
    const message = err instanceof Error ? err.message : String(err);
    invalid({ path: '(document)', message: `cannot be read: ${message}` });
  }
}

function invalid(...issues: SpecIssue[]): never {
  throw new InvalidSpecError(issues.map(boundSpecIssue));
}

function yamlIssue(e: YAMLError): SpecIssue {
  const pos = e.linePos?.[0];
  // The message's first line ends with its own "at line L, column C:"; the path says that already.
  const first = e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
  const message =
    e.code === 'TAG_RESOLVE_FAILED'
      ? `${first}: a ServedModel is plain YAML (strings, numbers, true/false, null, lists and mappings), without tags like !!set or !!binary`
      : first;
  return { path: pos ? `line ${pos.line}, column ${pos.col}` : '(document)', message };
}

function at(lineCounter: LineCounter, offset: number): string {
  const { line, col } = lineCounter.linePos(offset);
  return `line ${line}, column ${col}`;
}

const LEXER_MARKERS = new Set(['\u0002', '\u0018', '\u001f']);
const NOT_CONTENT = new Set(['space', 'newline', 'comment', 'doc-mode', 'doc-start', 'doc-end', 'directive-line']);

/**
 * Too deep or too large to parse, told from the lexer's tokens before the parser (whose time grows with the
 * nesting) runs. A level is a flow bracket, a `-` or `?` that opens a collection further along a line, or an
 * indentation deeper than the lines above (counting a value on a line of its own as a level too: hence the 1).
 */
function shapeProblem(text: string): SpecIssue | undefined {
  const lineCounter = new LineCounter();
  lineCounter.addNewLine(0);
  const indents: number[] = [];
  let offset = 0;
  let lineStart = 0;
  let lineHasContent = false;
  let tokens = 0;
  let values = 0;
  let flow = 0;
  let onLine = 0;
  let scalarSource = false;
  for (const token of new Lexer().lex(text)) {
    const start = offset;
    if (!LEXER_MARKERS.has(token)) offset += token.length;
    if (++tokens > MAX_TOKENS) {
      return { path: '(document)', message: `is too large: more than ${MAX_TOKENS} YAML tokens` };
    }
    if (scalarSource) {
      scalarSource = false;
      continue;
    }
    const type = CST.tokenType(token);
    if (type === 'newline') {
      lineCounter.addNewLine(offset);
      lineStart = offset;
      lineHasContent = false;
      onLine = 0;
      continue;
    }
    if (type === 'doc-start') indents.length = 0;
    if (type === null || NOT_CONTENT.has(type)) continue;
    if (!lineHasContent) {
      lineHasContent = true;
      if (flow === 0) {
        const column = start - lineStart;
        while (indents.length > 0 && indents[indents.length - 1]! >= column) indents.pop();
        indents.push(column);
      }
    } else if ((type === 'seq-item-ind' || type === 'explicit-key-ind') && flow === 0) {
      onLine++;
    }
    switch (type) {
      case 'scalar':
        scalarSource = true;
        values++;
        break;
      case 'single-quoted-scalar':
      case 'double-quoted-scalar':
      case 'alias':
        values++;
        break;
      case 'flow-map-start':
      case 'flow-seq-start':
        values++;
        flow++;
        break;
      case 'flow-map-end':
      case 'flow-seq-end':
        flow = Math.max(0, flow - 1);
        break;
    }
    if (indents.length + onLine + flow > DOCUMENT_LIMITS.depth + 1) {
      const { line, col } = lineCounter.linePos(start);
      return {
        path: `line ${line}, column ${col}`,
        message: `nests lists and mappings more than ${DOCUMENT_LIMITS.depth} levels deep`,
      };
    }
    if (values > DOCUMENT_LIMITS.values) {
      return {
        path: '(document)',
        message: `is too large: more than ${DOCUMENT_LIMITS.values} values (one with every field set has about 150)`,
      };
    }
  }
  return undefined;
}

/** Keys that are not plain values, keys given twice, and aliases with no anchor before them. */
function nodeProblems(doc: Document, lineCounter: LineCounter): SpecIssue[] {
  const issues: SpecIssue[] = [];
  const anchors = new Set<string>();
  visit(doc, (_key, node) => {
    if (isNode(node) && node.anchor) anchors.add(node.anchor);
    if (isAlias(node) && !anchors.has(node.source)) {
      issues.push({
        path: at(lineCounter, node.range?.[0] ?? 0),
        message: `the alias *${node.source} has no anchor &${node.source} before it`,
      });
    }
    if (!isMap(node)) return;
    const seen = new Set<string>();
    for (const pair of node.items) {
      const key = pair.key;
      const offset = isNode(key) ? (key.range?.[0] ?? 0) : (node.range?.[0] ?? 0);
      if (key !== null && !isScalar(key)) {
        issues.push({
          path: at(lineCounter, offset),
          message: 'a key must be a plain value, not a list, mapping or alias',
        });
        continue;
      }
      // As toJS names the property: core-schema scalars are strings, numbers, booleans or null ('').
      const value = key?.value;
      const name =
        typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ? String(value) : '';
      if (seen.has(name))
        issues.push({ path: at(lineCounter, offset), message: `the key ${JSON.stringify(name)} is given twice` });
      seen.add(name);
    }
  });
  return issues;
}
