// `ferry explain [PATH]`: a field of the ServedModel document, as `kubectl explain` shows one — its type, default,
// bounds and description, and the fields under it — read from the JSON Schema the package ships
// (schema/servedmodel.schema.json, generated from the same zod schema the parser uses). Offline; pure but for reading
// the schema file.
import { readFileSync } from 'node:fs';
import { PRINTABLE } from '../../workflows/contract/spec/text.js';

interface Schema {
  description?: string;
  type?: string | string[];
  default?: unknown;
  enum?: unknown[];
  const?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: Schema | boolean;
  anyOf?: Schema[];
  oneOf?: Schema[];
}

/** The schema, at the package root: `../../schema/…` from the sources, `../../../schema/…` from the build. */
function loadSchema(): Schema {
  for (const path of ['../../schema/servedmodel.schema.json', '../../../schema/servedmodel.schema.json']) {
    try {
      return JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as Schema;
    } catch {
      // Not in this layout.
    }
  }
  throw new Error(`no schema/servedmodel.schema.json above ${import.meta.url}`);
}

/** The object (or list of objects) a schema describes, through nullable and list wrappers. */
function inner(schema: Schema): Schema {
  const options = schema.properties ? undefined : (schema.anyOf ?? schema.oneOf);
  if (options) {
    const object = options.find((o) => o.properties || o.items);
    if (object) return inner(object);
  }
  if (schema.items) return inner(schema.items);
  return schema;
}

function typeOf(schema: Schema): string {
  const options = schema.anyOf ?? schema.oneOf;
  // Alternatives with a type each (a nullable field); ones without (exactly one of two fields) say nothing of it.
  if (options && schema.type === undefined && !schema.properties) return [...new Set(options.map(typeOf))].join(' | ');
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (schema.items) return `[]${typeOf(schema.items)}`;
  if (Array.isArray(schema.type)) return schema.type.join(' | ');
  if (schema.type === 'object' && !schema.properties && typeof schema.additionalProperties === 'object') {
    return `map[string]${typeOf(schema.additionalProperties)}`;
  }
  return schema.type ?? (schema.properties ? 'object' : 'any');
}

/** What `path` (`spec.engine.port`; empty: the document) means; an unknown field is an error naming the ones there are. */
export function explain(path: string, schema: Schema = loadSchema()): string {
  const parts = path.split('.').filter(Boolean);
  let field = schema;
  let required = false;
  for (const [index, part] of parts.entries()) {
    const parent = inner(field);
    const next = parent.properties?.[part];
    if (!next) {
      const here = parts.slice(0, index).join('.') || 'the document';
      const known = Object.keys(parent.properties ?? {});
      throw new Error(
        known.length
          ? `${here} has no field ${JSON.stringify(part)}; its fields: ${known.join(', ')}`
          : `${here} has no fields (it is ${typeOf(parent)})`,
      );
    }
    required = parent.required?.includes(part) ?? false;
    field = next;
  }
  const lines = [`FIELD: ${parts.join('.') || 'ServedModel'} <${typeOf(field)}>${required ? ' (required)' : ''}`];
  if (field.default !== undefined) lines.push(`DEFAULT: ${JSON.stringify(field.default)}`);
  const bounds = [
    field.minimum !== undefined ? `at least ${field.minimum}` : '',
    field.maximum !== undefined ? `at most ${field.maximum}` : '',
    field.minLength !== undefined ? `at least ${field.minLength} characters` : '',
    field.maxLength !== undefined ? `at most ${field.maxLength} characters` : '',
  ].filter(Boolean);
  if (bounds.length) lines.push(`BOUNDS: ${bounds.join(', ')}`);
  // A pattern is what the parser tests too; printable strings (every string's rule) are left out as noise.
  if (field.pattern && field.pattern !== PRINTABLE.source) lines.push(`PATTERN: ${field.pattern}`);
  if (field.description) lines.push('', 'DESCRIPTION:', ...wrap(field.description, 2));
  const object = inner(field);
  if (object.properties) {
    lines.push('', 'FIELDS:');
    const width = Math.max(...Object.keys(object.properties).map((name) => name.length));
    for (const [name, sub] of Object.entries(object.properties)) {
      const mark = object.required?.includes(name) ? ' (required)' : '';
      lines.push(`  ${name.padEnd(width)}  <${typeOf(sub)}>${mark}`);
      if (sub.description) lines.push(...wrap(sub.description, width + 6));
    }
  }
  return `${lines.join('\n')}\n`;
}

/** `text` in lines of at most 100 characters, indented. */
function wrap(text: string, indent: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line && indent + line.length + 1 + word.length > 100) {
      lines.push(' '.repeat(indent) + line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(' '.repeat(indent) + line);
  return lines;
}
