// ServedModel documents as people write them: YAML (or JSON) text, validated with the workflow's own schema.
import { parseAllDocuments } from 'yaml';
import { safeParseServedModel, type ServedModel } from '../workflows/contract/index.js';
import { InvalidSpecError } from './errors.js';

/** Validates a document and fills its defaults; `InvalidSpecError` lists every problem with its field path. */
export function parseModelDocument(doc: unknown): ServedModel {
  const result = safeParseServedModel(doc);
  if (!result.ok) throw new InvalidSpecError(result.issues);
  return result.model;
}

/** The one YAML document in `text`, as plain data; syntax errors become issues with line and column. */
export function parseModelYaml(text: string): unknown {
  const docs = parseAllDocuments(text);
  if (!Array.isArray(docs) || docs.length === 0) {
    throw new InvalidSpecError([{ path: '(document)', message: 'is empty: expected one ServedModel document' }]);
  }
  const errors = docs.flatMap((d) => d.errors);
  if (errors.length > 0) {
    throw new InvalidSpecError(
      errors.map((e) => {
        const pos = e.linePos?.[0];
        // The message's first line ends with its own "at line L, column C:"; the path says that already.
        const message = e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
        return { path: pos ? `line ${pos.line}, column ${pos.col}` : '(document)', message };
      }),
    );
  }
  if (docs.length > 1) {
    throw new InvalidSpecError([
      { path: '(document)', message: `has ${docs.length} YAML documents: give one ServedModel per file` },
    ]);
  }
  return docs[0]!.toJS();
}
