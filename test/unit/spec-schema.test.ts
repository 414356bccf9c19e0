import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { generatedFiles, SCHEMA_FILE, servedModelJsonSchema, specMarkdown } from '../../deploy/schema/spec-schema.js';
import { parseServedModel, safeParseServedModel } from '../../workflows/contract/index.js';
import { repoRoot } from '../support/local-env.js';
import { FIXTURE_NAMES, fixtures, minimalHf } from './fixtures.js';

const read = (file: string): string =>
  existsSync(join(repoRoot, file)) ? readFileSync(join(repoRoot, file), 'utf8') : '';

describe('the generated spec files', () => {
  it.each(Object.entries(generatedFiles()))('%s is what `npm run gen:spec` writes now', (file, text) => {
    expect(read(file), `${file} is stale: run \`npm run gen:spec\` and commit the result`).toBe(text);
  });

  it('give every field a meaning', () => {
    const missing: string[] = [];
    const walk = (schema: any, path: string): void => {
      if (typeof schema !== 'object' || schema === null) return;
      for (const [key, field] of Object.entries<any>(schema.properties ?? {})) {
        const at = path ? `${path}.${key}` : key;
        if (!field.description?.trim()) missing.push(at);
        walk(field, at);
      }
      walk(schema.items, `${path}[]`);
      for (const option of schema.anyOf ?? []) walk(option, path);
    };
    const schema = servedModelJsonSchema();
    walk(schema, '');
    expect(missing).toEqual([]);
    // The walk reaches the deepest fields too (Kubernetes' affinity).
    expect(JSON.stringify(schema)).toContain('mismatchLabelKeys');

    const rows = specMarkdown()
      .split('\n')
      .filter((line) => line.startsWith('| `'));
    expect(rows.length).toBeGreaterThan(40);
    expect(rows.filter((row) => /\|\s*\|\s*$/.test(row))).toEqual([]);
  });
});

describe('the JSON Schema, with a JSON Schema validator', () => {
  // Strict: an unknown keyword, a keyword without its type or a required field not defined there fails to compile.
  const validate = new Ajv({ strict: true }).compile(JSON.parse(read(SCHEMA_FILE)));
  const errorsOf = (doc: unknown) =>
    validate(doc) ? [] : validate.errors!.map((e) => `${e.instancePath} ${e.message}`);
  const example = (file: string): unknown => parseYaml(read(`examples/${file}`));

  it.each(['qwen.yaml', 'qwen-full.yaml'])('accepts examples/%s', (file) => {
    expect(errorsOf(example(file))).toEqual([]);
  });

  it.each(FIXTURE_NAMES)('accepts the %s fixture, as written and with its defaults filled in', (name) => {
    expect(errorsOf(fixtures[name])).toEqual([]);
    expect(errorsOf(JSON.parse(JSON.stringify(parseServedModel(fixtures[name]))))).toEqual([]);
  });

  type Case = [title: string, change: (doc: any) => void, error: string];
  const bad: Case[] = [
    ['an unknown field', (d) => (d.spec.engine = { imag: 'vllm/vllm-openai:v0.11.0' }), '/spec/engine must NOT have'],
    ['a number of replicas as a word', (d) => (d.spec.replicas = 'two'), '/spec/replicas must be integer'],
    ['a port out of range', (d) => (d.spec.engine = { port: 70000 }), '/spec/engine/port must be <= 65535'],
    ['an unknown access mode', (d) => (d.spec.storage = { accessMode: 'RWO' }), '/spec/storage/accessMode must be'],
    ['another kind', (d) => (d.kind = 'Deployment'), '/kind must be equal to constant'],
    ['no name', (d) => delete d.metadata.name, '/metadata must have required property'],
    ['no source', (d) => (d.spec.source = {}), '/spec/source must NOT have fewer than 1 properties'],
    [
      'two sources',
      (d) => (d.spec.source.pvc = { claimName: 'checkpoints' }),
      '/spec/source must NOT have more than 1 properties',
    ],
    ['a model name with capitals', (d) => (d.metadata.name = 'Qwen'), '/metadata/name must match pattern'],
    ['the model name vllm', (d) => (d.metadata.name = 'vllm'), '/metadata/name must NOT be valid'],
    ['a label key with a space', (d) => (d.metadata.labels = { 'a b': 'x' }), '/metadata/labels property name'],
    ['a memory of "lots"', (d) => (d.spec.resources = { memory: 'lots' }), '/spec/resources/memory must match pattern'],
    ['a negative number of CPUs', (d) => (d.spec.resources = { cpu: -1 }), '/spec/resources/cpu must be > 0'],
    ['a deadline of "45 minutes"', (d) => (d.spec.puller = { deadline: '45 minutes' }), '/spec/puller/deadline'],
    ['an image with a space', (d) => (d.spec.engine = { image: 'vllm openai' }), '/spec/engine/image must match'],
    ['an argument Ferry sets', (d) => (d.spec.engine = { args: ['--por=9'] }), '/spec/engine/args/0 must match'],
    ['replicas past 32 bits', (d) => (d.spec.replicas = 2 ** 31), '/spec/replicas must be <= 2147483647'],
    [
      'a control character',
      (d) => (d.spec.engine = { env: [{ name: 'A', value: '\u001b' }] }),
      '/env/0/value must match pattern',
    ],
    ['a reserved variable', (d) => (d.spec.engine = { env: [{ name: 'HF_TOKEN', value: 'x' }] }), 'name must NOT'],
    ['a revision with ".."', (d) => (d.spec.source.huggingface.revision = 'a..b'), '/revision must match'],
  ];

  it.each(bad)('rejects a document with %s, as Ferry does', (_title, change, error) => {
    const doc = structuredClone(minimalHf) as any;
    change(doc);
    expect(errorsOf(doc).join('\n')).toContain(error);
    expect(safeParseServedModel(doc).ok).toBe(false);
  });
});
