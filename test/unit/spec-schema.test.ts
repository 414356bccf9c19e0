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

  it.each(['qwen.yaml', 'qwen-full.yaml', 'canary.yaml'])('accepts examples/%s', (file) => {
    expect(errorsOf(example(file))).toEqual([]);
  });

  it.each(FIXTURE_NAMES)('accepts the %s fixture, as written and with its defaults filled in', (name) => {
    expect(errorsOf(fixtures[name])).toEqual([]);
    expect(errorsOf(JSON.parse(JSON.stringify(parseServedModel(fixtures[name]))))).toEqual([]);
  });

  const adapter = { name: 'sql', source: { huggingface: { repo: 'a/sql' } } };
  const nodeRequirement = (requirement: object) => ({
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: 'gpu.count', ...requirement }] }],
        },
      },
    },
  });

  type Case = [title: string, change: (doc: any) => void, error: string];
  // What the rules between fields allow, which the JSON Schema must allow too.
  const good: [title: string, change: (doc: any) => void][] = [
    ['a one-pod volume with the default replicas', (d) => (d.spec.storage = { accessMode: 'ReadWriteOncePod' })],
    ['a toleration of every taint', (d) => (d.spec.scheduling = { tolerations: [{ operator: 'Exists' }] })],
    ['a node requirement Gt 8', (d) => (d.spec.scheduling = nodeRequirement({ operator: 'Gt', values: ['8'] }))],
    ['a node requirement Exists', (d) => (d.spec.scheduling = nodeRequirement({ operator: 'Exists' }))],
    ['a size of "+.5Gi"', (d) => (d.spec.storage = { size: '+.5Gi' })],
  ];

  it.each(good)('accepts a document with %s, as Ferry does', (_title, change) => {
    const doc = structuredClone(minimalHf) as any;
    change(doc);
    expect(errorsOf(doc)).toEqual([]);
    expect(safeParseServedModel(doc).ok).toBe(true);
  });

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
    [
      'adapters with LoRA left off',
      (d) => (d.spec.engine = { lora: { adapters: [adapter] } }),
      "/spec/engine/lora must have required property 'enabled'",
    ],
    [
      'adapters with LoRA turned off',
      (d) => (d.spec.engine = { lora: { enabled: false, adapters: [adapter] } }),
      '/spec/engine/lora/enabled must be equal to constant',
    ],
    [
      'two replicas on a one-pod volume',
      (d) => Object.assign(d.spec, { storage: { accessMode: 'ReadWriteOncePod' }, replicas: 2 }),
      '/spec/replicas must be <= 1',
    ],
    [
      'an adapter on a one-pod volume',
      (d) =>
        Object.assign(d.spec, {
          storage: { accessMode: 'ReadWriteOncePod' },
          engine: { lora: { enabled: true, adapters: [adapter] } },
        }),
      '/spec/engine/lora/adapters must NOT have more than 0 items',
    ],
    [
      'a toleration Exists with a value',
      (d) => (d.spec.scheduling = { tolerations: [{ key: 'a', operator: 'Exists', value: 'b' }] }),
      '/spec/scheduling/tolerations/0/value must be equal to constant',
    ],
    [
      'a toleration with seconds but no effect',
      (d) => (d.spec.scheduling = { tolerations: [{ key: 'a', tolerationSeconds: 30 }] }),
      "/spec/scheduling/tolerations/0 must have required property 'effect'",
    ],
    [
      'a toleration with seconds and NoSchedule',
      (d) => (d.spec.scheduling = { tolerations: [{ key: 'a', effect: 'NoSchedule', tolerationSeconds: 30 }] }),
      '/spec/scheduling/tolerations/0/effect must be equal to constant',
    ],
    [
      'a toleration without key that is not Exists',
      (d) => (d.spec.scheduling = { tolerations: [{ operator: 'Equal' }] }),
      '/spec/scheduling/tolerations/0/operator must be equal to constant',
    ],
    [
      'a node requirement In without values',
      (d) => (d.spec.scheduling = nodeRequirement({ operator: 'In' })),
      "/matchExpressions/0 must have required property 'values'",
    ],
    [
      'a node requirement Exists with a value',
      (d) => (d.spec.scheduling = nodeRequirement({ operator: 'Exists', values: ['a'] })),
      '/matchExpressions/0/values must NOT have more than 0 items',
    ],
    [
      'a node requirement Gt with two values',
      (d) => (d.spec.scheduling = nodeRequirement({ operator: 'Gt', values: ['1', '2'] })),
      '/matchExpressions/0/values must NOT have more than 1 items',
    ],
    [
      'a node requirement Lt with a word',
      (d) => (d.spec.scheduling = nodeRequirement({ operator: 'Lt', values: ['many'] })),
      '/matchExpressions/0/values/0 must match pattern',
    ],
    [
      'a pod requirement NotIn with no values',
      (d) =>
        (d.spec.scheduling = {
          affinity: {
            podAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: [
                {
                  labelSelector: { matchExpressions: [{ key: 'app', operator: 'NotIn', values: [] }] },
                  topologyKey: 'a',
                },
              ],
            },
          },
        }),
      '/labelSelector/matchExpressions/0/values must NOT have fewer than 1 items',
    ],
    [
      'a variable with value and valueFrom',
      (d) =>
        (d.spec.engine = { env: [{ name: 'A', value: 'x', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }] }),
      '/spec/engine/env/0 must NOT be valid',
    ],
    ['a memory of "0Gi"', (d) => (d.spec.resources = { memory: '0Gi' }), '/spec/resources/memory must match pattern'],
    ['a size of "-1Gi"', (d) => (d.spec.storage = { size: '-1Gi' }), '/spec/storage/size must match pattern'],
    ['a deadline of "0m0s"', (d) => (d.spec.puller = { deadline: '0m0s' }), '/spec/puller/deadline must match pattern'],
  ];

  it.each(bad)('rejects a document with %s, as Ferry does', (_title, change, error) => {
    const doc = structuredClone(minimalHf) as any;
    change(doc);
    expect(errorsOf(doc).join('\n')).toContain(error);
    expect(safeParseServedModel(doc).ok).toBe(false);
  });
});
