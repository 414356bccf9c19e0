// The ServedModel's JSON Schema and docs/spec.md, both generated from the zod schema. Pure and deterministic:
// `npm run gen:spec` writes them, test/unit/spec-schema.test.ts fails when the committed files differ.
import { z } from 'zod';
import { API_VERSION, KIND, servedModelSchema } from '../../workflows/contract/index.js';
import { PARSER_ONLY_RULES } from '../../workflows/contract/spec/parser-only.js';
import { INT32_MAX } from '../../workflows/contract/spec/rules.js';
import { PRINTABLE } from '../../workflows/contract/spec/text.js';

type JsonSchema = z.core.JSONSchema.JSONSchema;

export const SCHEMA_FILE = 'schema/servedmodel.schema.json';
const SPEC_DOC_FILE = 'docs/spec.md';
const SCHEMA_ID = `https://ferry.dev/schema/${API_VERSION.split('/')[1]}/servedmodel.schema.json`;

// Kubernetes' own types: the JSON Schema describes every field inside; the doc points to Kubernetes' reference.
const UPSTREAM: Record<string, string> = {
  'spec.scheduling.affinity': 'https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#affinity',
};

// zod leaves out a default wherever a transform sits beneath it (quantities, env values): the default is an
// output value. Ours are valid inputs too, so they are put back where the input schema accepts them.
function restoreDefault(zodSchema: z.core.$ZodTypes, json: JsonSchema): void {
  if (zodSchema._zod.def.type !== 'default' || 'default' in json) return;
  const { innerType, defaultValue } = zodSchema._zod.def;
  if (z.safeParse(innerType, defaultValue).success) json.default = structuredClone(defaultValue);
}

// `.int()` bounds every integer by Number.MAX_SAFE_INTEGER; the parser's own ceiling is 32 bits (`int` in rules.ts).
function boundIntegers(json: JsonSchema): void {
  if (json.type !== 'integer') return;
  json.maximum = Math.min(json.maximum ?? INT32_MAX, INT32_MAX);
}

// Every string of a document is printable (input.ts): a string with no pattern of its own gets that one. A rule's
// own pattern admits no unsafe character.
function printableStrings(json: JsonSchema): void {
  const types = Array.isArray(json.type) ? json.type : [json.type];
  if (types.includes('string') && json.pattern === undefined && json.const === undefined && !json.enum) {
    json.pattern = PRINTABLE.source;
  }
}

// Keywords in reading order (what a field is and means, its default, then its shape), the rest alphabetically;
// field names keep the schema's order, which is the document's.
const KEYWORD_ORDER = [
  '$schema',
  '$id',
  'title',
  'description',
  'type',
  'const',
  'enum',
  'default',
  'minimum',
  'maximum',
  'minLength',
  'properties',
  'required',
  'additionalProperties',
  'propertyNames',
  'items',
  'anyOf',
  'oneOf',
  'allOf',
  'if',
  'then',
  'else',
];
const SUBSCHEMA = new Set(['additionalProperties', 'propertyNames', 'items', 'not', 'if', 'then', 'else']);
const SUBSCHEMA_LIST = new Set(['anyOf', 'oneOf', 'allOf']);

function rank(key: string): number {
  const index = KEYWORD_ORDER.indexOf(key);
  return index < 0 ? KEYWORD_ORDER.length : index;
}

function canonical(schema: JsonSchema): JsonSchema {
  const sub = (value: unknown): unknown =>
    typeof value === 'object' && value !== null && !Array.isArray(value) ? canonical(value as JsonSchema) : value;
  const out: Record<string, unknown> = {};
  const keys = Object.keys(schema).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
  for (const key of keys) {
    const value = schema[key];
    if (key === 'properties') {
      out[key] = Object.fromEntries(Object.entries(value as object).map(([name, field]) => [name, sub(field)]));
    } else if (SUBSCHEMA.has(key)) {
      out[key] = sub(value);
    } else if (SUBSCHEMA_LIST.has(key)) {
      out[key] = (value as unknown[]).map(sub);
    } else {
      out[key] = value;
    }
  }
  return out;
}

function property(schema: JsonSchema, ...path: string[]): JsonSchema {
  let at = schema;
  for (const key of path) {
    const next = at.properties?.[key];
    if (typeof next !== 'object') throw new Error(`the schema has no property ${path.join('.')}`);
    at = next;
  }
  return at;
}

/**
 * The document as people write it (zod's input side: fields with a default are optional and show it), draft-07,
 * which yaml-language-server and most editors support fully; nothing in it needs a later draft.
 */
export function servedModelJsonSchema(): JsonSchema {
  const generated = z.toJSONSchema(servedModelSchema, {
    target: 'draft-07',
    io: 'input',
    override: ({ zodSchema, jsonSchema }) => {
      restoreDefault(zodSchema, jsonSchema);
      boundIntegers(jsonSchema);
      printableStrings(jsonSchema);
    },
  });
  return canonical({
    ...generated,
    $id: SCHEMA_ID,
    title: KIND,
    description: `A ${KIND} (${API_VERSION}): one model Ferry serves on Kubernetes. Field by field: docs/spec.md. Ferry's parser also checks what this schema cannot say: ${Object.values(PARSER_ONLY_RULES).join('; ')}.`,
  });
}

// ---------------------------------------------------------------------------------------------------------------
// docs/spec.md

interface Row {
  path: string;
  type: string;
  default: string;
  meaning: string;
}

const code = (text: string): string => `\`${text}\``;
const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/</g, '&lt;').replace(/\n/g, ' ');
const anchor = (heading: string): string =>
  `#${heading
    .toLowerCase()
    .replace(/[^a-z0-9 -]/g, '')
    .replace(/ /g, '-')}`;

/** The schema's fields: its own, or those of the object it may be (`affinity`: an object or null). */
function objectOf(schema: JsonSchema): JsonSchema | undefined {
  if (schema.properties) return schema;
  return schema.anyOf?.find((option) => option.properties);
}

function itemsOf(schema: JsonSchema): JsonSchema | undefined {
  return typeof schema.items === 'object' && !Array.isArray(schema.items) ? schema.items : undefined;
}

function plural(type: string): string {
  return type.startsWith('list of') || type.startsWith('map of') ? type : `${type}s`;
}

function typeOf(schema: JsonSchema): string {
  if (schema.const !== undefined) return code(String(schema.const));
  if (schema.enum) return `one of ${schema.enum.map((value) => code(String(value))).join(', ')}`;
  if (schema.anyOf) return schema.anyOf.map(typeOf).join(' or ');
  if (Array.isArray(schema.type)) return schema.type.join(' or ');
  switch (schema.type) {
    case 'array': {
      const items = itemsOf(schema);
      return `list of ${plural(items ? typeOf(items) : 'value')}`;
    }
    case 'object':
      return typeof schema.additionalProperties === 'object'
        ? `map of string to ${typeOf(schema.additionalProperties)}`
        : 'object';
    case 'integer': {
      const { minimum, maximum } = schema;
      if (minimum !== undefined && maximum !== undefined) return `integer, ${minimum} to ${maximum}`;
      if (minimum !== undefined) return `integer, at least ${minimum}`;
      return 'integer';
    }
    default:
      return schema.type ?? 'any';
  }
}

function defaultOf(schema: JsonSchema, required: boolean): string {
  if (required) return 'required';
  if (!('default' in schema)) return '—';
  const value = schema.default;
  return typeof value === 'string' && value !== '' ? code(value) : code(JSON.stringify(value));
}

/** Rows for every field below `schema`, down to the leaves, except those with a section of their own. */
function rowsOf(schema: JsonSchema, prefix: string, sections: ReadonlyMap<string, JsonSchema>): Row[] {
  const rows: Row[] = [];
  const required = new Set(schema.required ?? []);
  for (const [key, value] of Object.entries(schema.properties ?? {})) {
    if (typeof value !== 'object') continue;
    const path = prefix ? `${prefix}.${key}` : key;
    const own = sections.has(path);
    const upstream = UPSTREAM[path];
    const type = own ? `object ([below](${anchor(path)}))` : typeOf(value);
    let meaning = value.description ?? '';
    if (upstream) meaning += ` Its fields are Kubernetes' own: [reference](${upstream}).`;
    rows.push({ path: code(path), type, default: defaultOf(value, required.has(key)), meaning });
    if (own || upstream) continue;
    const items = itemsOf(value);
    const itemObject = items && objectOf(items);
    if (itemObject) rows.push(...rowsOf(itemObject, `${path}[]`, sections));
    const object = objectOf(value);
    if (object) rows.push(...rowsOf(object, path, sections));
  }
  return rows;
}

function table(rows: readonly Row[]): string {
  const lines = ['| field | type | default | meaning |', '|---|---|---|---|'];
  for (const row of rows) {
    lines.push(`| ${[row.path, row.type, row.default, row.meaning].map(cell).join(' | ')} |`);
  }
  return lines.join('\n');
}

/** docs/spec.md: a table per part of the document (field, type, default, meaning), from the JSON Schema above. */
export function specMarkdown(): string {
  const schema = servedModelJsonSchema();
  const spec = property(schema, 'spec');
  // A section, by its path, for metadata, for spec's own fields, and for each object under spec.
  const sections = new Map<string, JsonSchema>([
    ['metadata', property(schema, 'metadata')],
    ['spec', spec],
  ]);
  for (const [key, value] of Object.entries(spec.properties ?? {})) {
    if (typeof value === 'object' && value.type === 'object') sections.set(`spec.${key}`, value);
  }
  const parts = [
    `# The ${KIND} document`,
    [
      `Every field of a ${KIND} (\`apiVersion: ${API_VERSION}\`), with its type, its default and what it means; a`,
      'field with a default may be left out, and [examples/qwen-full.yaml](../examples/qwen-full.yaml) sets every',
      'field. Generated by `npm run gen:spec` from the zod schema (`workflows/contract/spec/schema.ts`), together with',
      `the JSON Schema [\`${SCHEMA_FILE}\`](../${SCHEMA_FILE}) (in the package as \`@ferry-dev/ferry/schema.json\`),`,
      'with which editors that use the YAML language server check and complete documents: the examples name it in',
      'their first line, `# yaml-language-server: $schema=../schema/servedmodel.schema.json`. Do not edit this file:',
      '`test/unit/spec-schema.test.ts` fails when it or the JSON Schema is stale.',
    ].join('\n'),
    [
      "The JSON Schema is generated from the parser's own rules (the client library, the CLI and the workflow read",
      'documents with it): each format a regular expression can say (names, label keys and values, image references,',
      'quantities, durations, revisions, engine arguments Ferry sets itself, printable strings) is one expression in',
      '`workflows/contract/spec/`, tested by the parser and copied into the schema as its `pattern`, with its bounds.',
      "The rules between fields it can say (adapters and engine.lora.enabled, a ReadWriteOncePod volume's replicas and",
      "adapters, a toleration's fields, a selector requirement's values for its operator, a variable's value or",
      "valueFrom) are in it as `if`/`then`, from the same constants the parser's checks read (`field-rules.ts`, the",
      "operators' table in `rules.ts`, the one-pod limits in `schema.ts`).",
      'What a draft-07 JSON Schema cannot say, only the parser checks (`workflows/contract/spec/parser-only.ts`):',
      '',
      ...Object.values(PARSER_ONLY_RULES).map((rule) => `- ${rule}`),
      '',
      '`test/unit/schema-differential.test.ts` runs both over hostile documents and fails on any other difference.',
      'The parser names the field of each problem. Which fields an update may not change is in',
      '`workflows/contract/spec/updates.ts`.',
    ].join('\n'),
    '## The document',
    table(rowsOf(schema, '', sections)),
    ...[...sections].flatMap(([path, section]) => [`## ${path}`, table(rowsOf(section, path, sections))]),
  ];
  return `${parts.join('\n\n')}\n`;
}

/** Every generated file, by its path from the repository's root. */
export function generatedFiles(): Record<string, string> {
  return {
    [SCHEMA_FILE]: `${JSON.stringify(servedModelJsonSchema(), null, 2)}\n`,
    [SPEC_DOC_FILE]: specMarkdown(),
  };
}
