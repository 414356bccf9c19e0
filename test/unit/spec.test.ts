import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import {
  asAcceptedBefore,
  describeSource,
  durationSeconds,
  formatSpecIssues,
  immutableChanges,
  parseDuration,
  parseQuantity,
  parseServedModel,
  safeParseServedModel,
  sameSource,
  sourceIdentity,
  SpecError,
  specForUpdate,
  type ServedModel,
} from '../../workflows/contract/index.js';
import { FIXTURE_NAMES, fixtures, fullHf, minimalHf, pvcSource, s3Source } from './fixtures.js';

const clone = <T>(value: T): T => structuredClone(value);
// Documents are untyped on purpose here: the tests feed in what a person might write, mistakes included.

type Doc = any;

function issuesOf(doc: unknown) {
  const result = safeParseServedModel(doc);
  if (result.ok) throw new Error('expected the document to be rejected');
  return result.issues;
}

const adapter = (name: string) => ({ name, source: { huggingface: { repo: `org/${name.replace(/\W/g, '-')}-lora` } } });

function readExample(file: string): unknown {
  return parseYaml(readFileSync(new URL(`../../examples/${file}`, import.meta.url), 'utf8'));
}

describe('parseServedModel', () => {
  it('fills every default into the minimal spec', () => {
    expect(parseServedModel(minimalHf)).toEqual({
      apiVersion: 'ferry.dev/v1alpha1',
      kind: 'ServedModel',
      metadata: { name: 'qwen', namespace: 'default', labels: {} },
      spec: {
        cluster: 'default',
        source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
        engine: {
          image: 'vllm/vllm-openai:v0.32.0',
          servedModelName: 'qwen',
          port: 8000,
          args: [],
          env: [],
          lora: { enabled: false, maxLoras: 4 },
          startupTimeout: '40m',
        },
        resources: { gpus: 1, gpuResource: 'nvidia.com/gpu', cpu: '2', memory: '12Gi', shmSize: '2Gi' },
        storage: { size: '50Gi', storageClassName: null, accessMode: 'ReadWriteOnce', retainOnDelete: false },
        scheduling: { nodeSelector: {}, tolerations: [], affinity: null, colocateReplicas: true },
        replicas: 1,
        puller: { image: null, deadline: '2h', backoffLimit: 2, env: [] },
      },
    } satisfies ServedModel);
  });

  it('returns a spec with every field given unchanged', () => {
    expect(parseServedModel(fullHf)).toStrictEqual(fullHf);
  });

  it.each(FIXTURE_NAMES)('is idempotent: parsing the parsed %s fixture changes nothing', (name) => {
    const once = parseServedModel(fixtures[name]);
    expect(parseServedModel(JSON.parse(JSON.stringify(once)))).toStrictEqual(once);
  });

  it('accepts the examples; the full one sets every field', () => {
    const minimal = parseServedModel(readExample('qwen.yaml'));
    expect(minimal.metadata.name).toBe('qwen');
    expect(minimal.spec.engine.args).toEqual(['--max-model-len=4096']);
    const full = readExample('qwen-full.yaml');
    expect(parseServedModel(full)).toStrictEqual(full);
    const spec = (full as Doc).spec;
    expect(Object.keys(spec).sort()).toEqual(
      [
        'cluster',
        'source',
        'engine',
        'resources',
        'storage',
        'scheduling',
        'replicas',
        'puller',
        'slo',
        'inferencePool',
      ].sort(),
    );
    expect(Object.keys(spec.engine)).toHaveLength(8);
  });

  it('accepts LoRA adapters with the source defaults filled in; an empty list is a managed, empty set', () => {
    const doc: Doc = clone(minimalHf);
    doc.spec.engine = { lora: { enabled: true, maxLoraRank: 64, adapters: [adapter('team/sql-v2')] } };
    const { lora } = parseServedModel(doc).spec.engine;
    expect(lora).toEqual({
      enabled: true,
      maxLoras: 4,
      maxLoraRank: 64,
      adapters: [{ name: 'team/sql-v2', source: { huggingface: { repo: 'org/team-sql-v2-lora', revision: 'main' } } }],
    });
    doc.spec.engine = { lora: { enabled: true, adapters: [] } };
    expect(parseServedModel(doc).spec.engine.lora.adapters).toEqual([]);
    doc.spec.engine = { lora: { enabled: true } };
    expect(parseServedModel(doc).spec.engine.lora).toStrictEqual({ enabled: true, maxLoras: 4 });
  });

  it('accepts a latency goal with the workload and ceiling defaults filled in; without one there is no slo', () => {
    const doc: Doc = clone(minimalHf);
    expect(parseServedModel(doc).spec).not.toHaveProperty('slo');
    doc.spec.slo = { ttft: '2s', itl: '100ms' };
    expect(parseServedModel(doc).spec.slo).toStrictEqual({
      ttft: '2s',
      itl: '100ms',
      attainment: 0.95,
      workload: { promptTokens: 256, outputTokens: 128 },
      maxConcurrency: 256,
      admission: true,
    });
  });

  it('takes unquoted YAML numbers for quantities and env values', () => {
    const doc: Doc = clone(minimalHf);
    doc.spec.resources = { cpu: 4 };
    doc.spec.engine = { env: [{ name: 'WORKERS', value: 2 }] };
    const model = parseServedModel(doc);
    expect(model.spec.resources.cpu).toBe('4');
    expect(model.spec.engine.env).toEqual([{ name: 'WORKERS', value: '2' }]);
  });

  it('accepts a pvc source and defaults its path to the claim root', () => {
    expect(parseServedModel(pvcSource).spec.source).toEqual({
      pvc: { claimName: 'checkpoints', path: 'run-42/step-1000' },
    });
    const doc: Doc = clone(pvcSource);
    doc.spec.source.pvc = { claimName: 'checkpoints' };
    expect(parseServedModel(doc).spec.source.pvc?.path).toBe('');
  });

  type Case = [title: string, mutate: (doc: Doc) => void, path: string, message: string];
  const bad: Case[] = [
    ['uppercase name', (d) => (d.metadata.name = 'Qwen'), 'metadata.name', 'must be a DNS-1035 label'],
    ['name starting with a digit', (d) => (d.metadata.name = '7b'), 'metadata.name', 'starting with a letter'],
    ['name longer than 63', (d) => (d.metadata.name = 'q'.repeat(64)), 'metadata.name', 'at most 63 characters'],
    ['name vllm', (d) => (d.metadata.name = 'vllm'), 'metadata.name', 'VLLM_* variables'],
    ['namespace with a dot', (d) => (d.metadata.namespace = 'a.b'), 'metadata.namespace', 'namespace name'],
    ['bad label value', (d) => (d.metadata.labels = { team: 'a b' }), 'metadata.labels.team', 'label value'],
    ['zero size', (d) => (d.spec.storage = { size: '0' }), 'spec.storage.size', 'must be a positive quantity'],
    ['negative size', (d) => (d.spec.storage = { size: '-5Gi' }), 'spec.storage.size', 'positive quantity like 50Gi'],
    ['size "lots"', (d) => (d.spec.storage = { size: 'lots' }), 'spec.storage.size', 'got "lots"'],
    ['bad memory', (d) => (d.spec.resources = { memory: '32GB' }), 'spec.resources.memory', 'positive quantity'],
    [
      'shm as big as memory',
      (d) => (d.spec.resources = { memory: '8Gi', shmSize: '8Gi' }),
      'spec.resources.shmSize',
      'smaller than resources.memory',
    ],
    [
      'bad access mode',
      (d) => (d.spec.storage = { accessMode: 'RWO' }),
      'spec.storage.accessMode',
      'must be one of ReadWriteOnce',
    ],
    [
      'two sources',
      (d) => (d.spec.source.pvc = { claimName: 'c', path: 'p' }),
      'spec.source',
      'exactly one source, not 2',
    ],
    ['empty source', (d) => (d.spec.source = {}), 'spec.source', 'give exactly one source'],
    ['missing source', (d) => delete d.spec.source, 'spec.source', 'is required'],
    [
      'hub URL as repo',
      (d) => (d.spec.source.huggingface.repo = 'https://huggingface.co/Qwen/Q'),
      'spec.source.huggingface.repo',
      'not a URL',
    ],
    [
      'absolute pvc path',
      (d) => (d.spec.source = { pvc: { claimName: 'c', path: '/run' } }),
      'spec.source.pvc.path',
      'relative',
    ],
    [
      'pvc path with ..',
      (d) => (d.spec.source = { pvc: { claimName: 'c', path: 'a/../b' } }),
      'spec.source.pvc.path',
      '".."',
    ],
    [
      'own volume as source',
      (d) => (d.spec.source = { pvc: { claimName: 'qwen-weights' } }),
      'spec.source.pvc.claimName',
      "model's own volume",
    ],
    ['unknown top-level key', (d) => (d.status = {}), 'status', 'unknown field'],
    ['unknown nested key', (d) => (d.spec.engine = { imagee: 'x' }), 'spec.engine.imagee', 'did you mean "image"'],
    [
      'unknown key in secret ref',
      (d) => (d.spec.source.huggingface.tokenSecret = { name: 'hf', kee: 't' }),
      'spec.source.huggingface.tokenSecret.kee',
      'did you mean "key"',
    ],
    [
      'unknown key in affinity',
      (d) => (d.spec.scheduling = { affinity: { nodeAfinity: {} } }),
      'spec.scheduling.affinity.nodeAfinity',
      'did you mean "nodeAffinity"',
    ],
    [
      'bad duration',
      (d) => (d.spec.engine = { startupTimeout: '40 minutes' }),
      'spec.engine.startupTimeout',
      'must be a duration like 90s, 40m, 2h or 1h30m',
    ],
    [
      'zero duration',
      (d) => (d.spec.puller = { deadline: '0s' }),
      'spec.puller.deadline',
      'must be a positive duration',
    ],
    ['numeric duration', (d) => (d.spec.puller = { deadline: 7200 }), 'spec.puller.deadline', 'must be a duration'],
    [
      'env VLLM_API_KEY',
      (d) => (d.spec.engine = { env: [{ name: 'VLLM_API_KEY', value: 'k' }] }),
      'spec.engine.env[0].name',
      'engine.apiKeySecret',
    ],
    [
      'env HF_TOKEN',
      (d) => (d.spec.engine = { env: [{ name: 'HF_TOKEN', value: 't' }] }),
      'spec.engine.env[0].name',
      'tokenSecret',
    ],
    [
      'env name with a dash',
      (d) => (d.spec.engine = { env: [{ name: 'MY-VAR', value: '1' }] }),
      'spec.engine.env[0].name',
      'variable name',
    ],
    [
      'env listed twice',
      (d) =>
        (d.spec.engine = {
          env: [
            { name: 'A', value: '1' },
            { name: 'A', value: '2' },
          ],
        }),
      'spec.engine.env[1].name',
      'listed twice',
    ],
    [
      'args with --api-key=x',
      (d) => (d.spec.engine = { args: ['--max-model-len=4096', '--api-key=x'] }),
      'spec.engine.args[1]',
      'engine.apiKeySecret',
    ],
    [
      'args with --api_key',
      (d) => (d.spec.engine = { args: ['--api_key', 'x'] }),
      'spec.engine.args[0]',
      '--api-key must not be passed',
    ],
    ['args with --model', (d) => (d.spec.engine = { args: ['--model=/x'] }), 'spec.engine.args[0]', 'spec.source'],
    [
      'args with --served-model-name',
      (d) => (d.spec.engine = { args: ['--served-model-name', 'x'] }),
      'spec.engine.args[0]',
      'engine.servedModelName',
    ],
    ['args with --port', (d) => (d.spec.engine = { args: ['--port=9000'] }), 'spec.engine.args[0]', 'engine.port'],
    [
      'flag and value in one item',
      (d) => (d.spec.engine = { args: ['--max-model-len 4096'] }),
      'spec.engine.args[0]',
      'two list items',
    ],
    [
      'a value with no flag before it',
      (d) => (d.spec.engine = { args: ['true'] }),
      'spec.engine.args[0]',
      '"true" is not a flag and follows no flag that takes a value: vLLM would refuse it as an unrecognized argument',
    ],
    [
      'a value after a boolean flag',
      (d) => (d.spec.engine = { args: ['--enforce-eager', 'true'] }),
      'spec.engine.args[1]',
      'write --enforce-eager alone (or --no-enforce-eager)',
    ],
    [
      'a flag behind leading whitespace',
      (d) => (d.spec.engine = { args: [' --api-key=x'] }),
      'spec.engine.args[0]',
      '" --api-key=x" has leading whitespace, so it is not a flag: vLLM would refuse it as an unrecognized argument',
    ],
    [
      'a flag with leading whitespace after a flag with its value',
      (d) => (d.spec.engine = { args: ['--max-num-seqs=8', ' --max-model-len=4096'] }),
      'spec.engine.args[1]',
      '" --max-model-len=4096" has leading whitespace, so it is not a flag',
    ],
    [
      'a value after a flag that has its value after "="',
      (d) => (d.spec.engine = { args: ['--max-num-seqs=8', '8'] }),
      'spec.engine.args[1]',
      '"8" follows "--max-num-seqs=8", which already has its value after "="',
    ],
    [
      'a second value of a flag that takes one',
      (d) => (d.spec.engine = { args: ['--max-num-seqs', '8', '9'] }),
      'spec.engine.args[2]',
      '"9" follows --max-num-seqs "8", which takes one value',
    ],
    [
      'a value after "=" of a boolean flag',
      (d) => (d.spec.engine = { args: ['--enforce-eager=true'] }),
      'spec.engine.args[0]',
      '--enforce-eager takes no value',
    ],
    [
      'a negative decimal as a separate item',
      (d) => (d.spec.engine = { args: ['--seed', '-1.5'] }),
      'spec.engine.args[1]',
      'like "--seed=-1.5"',
    ],
    ['port 0', (d) => (d.spec.engine = { port: 0 }), 'spec.engine.port', 'from 1 to 65535'],
    ['port 70000', (d) => (d.spec.engine = { port: 70000 }), 'spec.engine.port', 'from 1 to 65535'],
    [
      'maxLoras 0',
      (d) => (d.spec.engine = { lora: { enabled: true, maxLoras: 0 } }),
      'spec.engine.lora.maxLoras',
      'at least 1',
    ],
    ['an slo without itl', (d) => (d.spec.slo = { ttft: '2s' }), 'spec.slo.itl', 'must be a duration like 100ms'],
    ['an slo ttft of 0s', (d) => (d.spec.slo = { ttft: '0s', itl: '50ms' }), 'spec.slo.ttft', 'positive duration'],
    [
      'an attainment of 1.5',
      (d) => (d.spec.slo = { ttft: '2s', itl: '50ms', attainment: 1.5 }),
      'spec.slo.attainment',
      'above 0 and at most 1',
    ],
    [
      'an attainment of 0',
      (d) => (d.spec.slo = { ttft: '2s', itl: '50ms', attainment: 0 }),
      'spec.slo.attainment',
      'above 0 and at most 1',
    ],
    [
      'a workload of 0 output tokens',
      (d) => (d.spec.slo = { ttft: '2s', itl: '50ms', workload: { outputTokens: 0 } }),
      'spec.slo.workload.outputTokens',
      'at least 1',
    ],
    [
      'a ceiling of 10000',
      (d) => (d.spec.slo = { ttft: '2s', itl: '50ms', maxConcurrency: 10_000 }),
      'spec.slo.maxConcurrency',
      'from 1 to 4096',
    ],
    [
      'maxLoraRank 12',
      (d) => (d.spec.engine = { lora: { enabled: true, maxLoraRank: 12 } }),
      'spec.engine.lora.maxLoraRank',
      "one of vLLM's LoRA ranks: 1, 8, 16",
    ],
    [
      'adapters without LoRA enabled',
      (d) => (d.spec.engine = { lora: { adapters: [] } }),
      'spec.engine.lora.adapters',
      'needs engine.lora.enabled: true',
    ],
    [
      'an adapter listed twice',
      (d) => (d.spec.engine = { lora: { enabled: true, adapters: [adapter('sql'), adapter('sql')] } }),
      'spec.engine.lora.adapters[1].name',
      '"sql" is listed twice',
    ],
    [
      'an adapter name with a space',
      (d) => (d.spec.engine = { lora: { enabled: true, adapters: [adapter('my sql')] } }),
      'spec.engine.lora.adapters[0].name',
      "the adapter's model name",
    ],
    [
      'an adapter name with ..',
      (d) => (d.spec.engine = { lora: { enabled: true, adapters: [adapter('a/../b')] } }),
      'spec.engine.lora.adapters[0].name',
      'no ".."',
    ],
    [
      "an adapter named as the base's served name",
      (d) => (d.spec.engine = { servedModelName: 'qwen', lora: { enabled: true, adapters: [adapter('qwen')] } }),
      'spec.engine.lora.adapters[0].name',
      "the base model's served name",
    ],
    [
      'more than 64 adapters',
      (d) =>
        (d.spec.engine = {
          lora: { enabled: true, adapters: Array.from({ length: 65 }, (_, i) => adapter(`a${i}`)) },
        }),
      'spec.engine.lora.adapters',
      'at most 64 adapters',
    ],
    [
      'an adapter without a source',
      (d) => (d.spec.engine = { lora: { enabled: true, adapters: [{ name: 'sql', source: {} }] } }),
      'spec.engine.lora.adapters[0].source',
      'exactly one source',
    ],
    [
      "an adapter copied from the model's own volume",
      (d) =>
        (d.spec.engine = {
          lora: { enabled: true, adapters: [{ name: 'sql', source: { pvc: { claimName: 'qwen-weights' } } }] },
        }),
      'spec.engine.lora.adapters[0].source.pvc.claimName',
      "the model's own volume",
    ],
    [
      'adapters on ReadWriteOncePod',
      (d) => (
        (d.spec.storage = { accessMode: 'ReadWriteOncePod' }),
        (d.spec.engine = { lora: { enabled: true, adapters: [adapter('sql')] } })
      ),
      'spec.engine.lora.adapters',
      'ReadWriteOncePod',
    ],
    ['replicas -1', (d) => (d.spec.replicas = -1), 'spec.replicas', 'must be 0 or more'],
    ['replicas 1.5', (d) => (d.spec.replicas = 1.5), 'spec.replicas', 'whole number'],
    ['gpus as a string', (d) => (d.spec.resources = { gpus: 'one' }), 'spec.resources.gpus', 'whole number of GPUs'],
    [
      'gpu resource without domain',
      (d) => (d.spec.resources = { gpuResource: 'gpu' }),
      'spec.resources.gpuResource',
      'nvidia.com/gpu',
    ],
    [
      'two replicas on ReadWriteOncePod',
      (d) => ((d.spec.storage = { accessMode: 'ReadWriteOncePod' }), (d.spec.replicas = 2)),
      'spec.replicas',
      'ReadWriteOncePod',
    ],
    [
      'toleration value with Exists',
      (d) => (d.spec.scheduling = { tolerations: [{ key: 'k', operator: 'Exists', value: 'v' }] }),
      'spec.scheduling.tolerations[0].value',
      'empty when operator is Exists',
    ],
    [
      'wrong apiVersion',
      (d) => (d.apiVersion = 'ferry.dev/v1'),
      'apiVersion',
      'must be ferry.dev/v1alpha1, got "ferry.dev/v1"',
    ],
    ['missing apiVersion', (d) => delete d.apiVersion, 'apiVersion', 'is required (ferry.dev/v1alpha1)'],
    ['wrong kind', (d) => (d.kind = 'Deployment'), 'kind', 'must be ServedModel, got "Deployment"'],
    ['cluster with a slash', (d) => (d.spec.cluster = 'a/b'), 'spec.cluster', 'cluster name'],
    ['engine as a list', (d) => (d.spec.engine = []), 'spec.engine', 'must be an object'],
  ];

  it.each(bad)('rejects %s', (_title, mutate, path, message) => {
    const doc: Doc = clone(minimalHf);
    mutate(doc);
    const issues = issuesOf(doc);
    expect(issues).toContainEqual({ path, message: expect.stringContaining(message) });
  });

  it.each<[string[]]>([
    [['--max-num-seqs', '8']],
    [['--max-num-seqs=8']],
    [['--enforce-eager']],
    [['--no-enforce-eager']],
    [['--lora-modules', 'a=/x', 'b=/y']],
    [['--seed', '-1']],
    [['--future-flag', '3']],
    [['--max_model_len', '4096']],
    [['--hf-token']],
    [['--hf-token', 'x', '--enforce-eager']],
    [['-tp', '2', '-O3', '-O', '3', '-q', 'awq']],
    [['--compilation-config.custom_ops+', '-rms_norm,+silu_and_mul', '-cc.mode=3']],
  ])('accepts engine.args %j: each item a flag or a value of the flag before it', (args) => {
    const doc: Doc = clone(minimalHf);
    doc.spec.engine = { args };
    expect(parseServedModel(doc).spec.engine.args).toEqual(args);
  });

  it('says which engine.args item vLLM would refuse, why, and what to write instead', () => {
    const doc: Doc = clone(minimalHf);
    doc.spec.engine = { args: ['--max-model-len=4096', '--enforce-eager', 'true', ' --api-key=x'] };
    expect(issuesOf(doc)).toEqual([
      {
        path: 'spec.engine.args[2]',
        message:
          '"true" follows --enforce-eager, which takes no value: vLLM would refuse it as an unrecognized argument; write --enforce-eager alone (or --no-enforce-eager)',
      },
      {
        path: 'spec.engine.args[3]',
        message: expect.stringMatching(
          /^" --api-key=x" has leading whitespace, so it is not a flag: vLLM would refuse it as an unrecognized argument; write "--api-key=x", though --api-key must not be passed as an argument/,
        ),
      },
    ]);
  });

  it('throws a SpecError that lists every problem, one line each', () => {
    const doc: Doc = clone(minimalHf);
    doc.metadata.name = 'Bad_Name';
    doc.spec.storage = { size: 'lots' };
    doc.spec.engine = { port: 0, colour: 'blue' };
    let error: unknown;
    try {
      parseServedModel(doc);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(SpecError);
    const { issues, message } = error as SpecError;
    expect(issues.map((i) => i.path).sort()).toEqual(
      ['metadata.name', 'spec.engine.colour', 'spec.engine.port', 'spec.storage.size'].sort(),
    );
    expect(message.split('\n')).toHaveLength(4);
    expect(message).toContain('spec.storage.size: must be a positive quantity like 50Gi, got "lots"');
    expect(formatSpecIssues(issues)).toBe(message);
  });

  it('reports a document that is not an object', () => {
    expect(issuesOf('qwen')).toEqual([{ path: '(document)', message: expect.stringContaining('must be an object') }]);
    expect(issuesOf(null)[0]?.message).toContain('got null');
  });

  it('gives each unknown key its own issue', () => {
    const doc: Doc = clone(minimalHf);
    doc.spec.storage = { sise: '1Gi', klass: 'x' };
    expect(issuesOf(doc).map((i) => i.path)).toEqual(['spec.storage.sise', 'spec.storage.klass']);
  });
});

describe('parseDuration', () => {
  it.each([
    ['90s', 90_000],
    ['40m', 2_400_000],
    ['2h', 7_200_000],
    ['1h30m', 5_400_000],
    ['1.5h', 5_400_000],
    ['500ms', 500],
    ['1d', 86_400_000],
    ['0s', 0],
  ])('%s is %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', '40', 'm', '1h 30m', '-5m', '40 minutes', '2H', 'PT1H'])('rejects %j', (text) => {
    expect(() => parseDuration(text)).toThrow(/like 90s, 40m, 2h or 1h30m/);
  });

  it('rounds seconds up', () => {
    expect(durationSeconds('40m')).toBe(2400);
    expect(durationSeconds('1500ms')).toBe(2);
  });
});

describe('parseQuantity', () => {
  it.each([
    ['50Gi', 50 * 2 ** 30],
    ['500m', 0.5],
    ['4', 4],
    ['1.5G', 1.5e9],
    ['1e3', 1000],
    ['0', 0],
  ])('%s is %d', (text, value) => {
    expect(parseQuantity(text)).toBeCloseTo(value);
  });

  it.each(['lots', '', '50GB', '1.2.3', 'Gi'])('rejects %j', (text) => {
    expect(parseQuantity(text)).toBeUndefined();
  });
});

describe('updates', () => {
  const current = parseServedModel(fullHf);

  function changed(mutate: (doc: Doc) => void): ServedModel {
    const doc: Doc = clone(fullHf);
    mutate(doc);
    return parseServedModel(doc);
  }

  it('lists no immutable change when only mutable fields change', () => {
    const next = changed((d) => {
      d.spec.engine.image = 'vllm/vllm-openai:v0.11.1';
      d.spec.source.huggingface.revision = 'main';
      d.spec.replicas = 0;
      d.spec.storage.size = '200Gi';
      d.spec.storage.retainOnDelete = false;
    });
    expect(immutableChanges(current, next)).toEqual([]);
  });

  it('lists each changed immutable field', () => {
    const next = changed((d) => {
      d.metadata.name = 'other';
      d.metadata.namespace = 'elsewhere';
      d.spec.cluster = 'gpu-west';
      d.spec.storage.storageClassName = null;
      d.spec.storage.accessMode = 'ReadWriteMany';
      d.spec.storage.size = '10Gi';
    });
    expect(immutableChanges(current, next)).toEqual([
      'metadata.name',
      'metadata.namespace',
      'spec.cluster',
      'spec.storage.storageClassName',
      'spec.storage.accessMode',
      'spec.storage.size',
    ]);
  });

  it('specForUpdate explains why a field cannot change', () => {
    const doc: Doc = clone(fullHf);
    doc.spec.cluster = 'gpu-west';
    expect(() => specForUpdate(current, doc)).toThrow(
      'spec.cluster: cannot change from "gpu-east" to "gpu-west": the model is served by that cluster’s worker',
    );
    doc.spec.cluster = 'gpu-east';
    doc.spec.replicas = 3;
    expect(specForUpdate(current, doc).spec.replicas).toBe(3);
  });

  it('specForUpdate reports validation problems the same way', () => {
    const doc: Doc = clone(fullHf);
    doc.spec.replicas = -1;
    expect(() => specForUpdate(current, doc)).toThrow(SpecError);
  });
});

describe('source identity', () => {
  const model = parseServedModel(fullHf);

  it('describes sources without secrets', () => {
    expect(describeSource(parseServedModel(minimalHf).spec.source)).toBe('huggingface:Qwen/Qwen2.5-0.5B-Instruct@main');
    expect(describeSource(parseServedModel(pvcSource).spec.source)).toBe('pvc:checkpoints/run-42/step-1000');
    expect(describeSource(model.spec.source)).not.toContain('hf-token');
    expect(describeSource(parseServedModel(s3Source).spec.source)).toBe(
      's3://training-runs/run-42/step-1000@http://minio.storage:9000',
    );
    const aws = clone(s3Source) as Doc;
    aws.spec.source.s3 = { bucket: 'runs', prefix: 'a/b/', region: 'eu-west-1' };
    expect(describeSource(parseServedModel(aws).spec.source)).toBe('s3://runs/a/b');
  });

  it('gives an s3 source its defaults and knows the same objects under new keys', () => {
    const source = parseServedModel(s3Source).spec.source;
    expect(source.s3).toEqual({
      bucket: 'training-runs',
      prefix: 'run-42/step-1000',
      endpoint: 'http://minio.storage:9000',
      region: 'us-east-1',
      addressing: 'path',
      credentialsSecret: { name: 'minio-keys' },
    });
    const rotated = {
      s3: { ...source.s3!, credentialsSecret: { name: 'minio-keys-2' }, addressing: 'virtual' as const },
    };
    const other = { s3: { ...source.s3!, prefix: 'run-42/step-2000' } };
    const slash = { s3: { ...source.s3!, prefix: 'run-42/step-1000/', endpoint: 'http://minio.storage:9000/' } };
    expect(sameSource(source, rotated)).toBe(true);
    expect(sameSource(source, slash)).toBe(true);
    expect(sameSource(source, other)).toBe(false);
    expect(sameSource(source, parseServedModel(pvcSource).spec.source)).toBe(false);
  });

  it('takes an oci source by tag or digest, and refuses a reference without its registry', () => {
    const oci = (reference: string, extra: Record<string, unknown> = {}) => {
      const doc = clone(minimalHf) as Doc;
      doc.spec.source = { oci: { reference, ...extra } };
      return safeParseServedModel(doc);
    };
    const tagged = oci('registry.example.com/models/qwen:1.0', { credentialsSecret: { name: 'regcred' } });
    expect(tagged.ok && tagged.model.spec.source.oci).toEqual({
      reference: 'registry.example.com/models/qwen:1.0',
      plainHttp: false,
      credentialsSecret: { name: 'regcred' },
    });
    expect(tagged.ok && describeSource(tagged.model.spec.source)).toBe('oci://registry.example.com/models/qwen:1.0');
    expect(oci(`10.0.0.1:5000/qwen@sha256:${'a'.repeat(64)}`, { plainHttp: true }).ok).toBe(true);
    for (const bad of ['qwen:1.0', 'https://registry.example.com/qwen:1.0', 'registry.example.com/Qwen:1.0']) {
      const result = oci(bad);
      expect(result.ok, bad).toBe(false);
      if (!result.ok) expect(result.issues[0]!.message).toContain('must be an OCI reference with its registry');
    }
    const a = oci('r.example.com/m:1', { credentialsSecret: { name: 'x' } });
    const b = oci('r.example.com/m:1', { plainHttp: true });
    const c = oci('r.example.com/m:2');
    if (!a.ok || !b.ok || !c.ok) throw new Error('expected valid documents');
    expect(sameSource(a.model.spec.source, b.model.spec.source)).toBe(true);
    expect(sameSource(a.model.spec.source, c.model.spec.source)).toBe(false);
  });

  it("takes an image's directory as source.oci.path, a part of the source unless it is /models", () => {
    const oci = (path?: string) => {
      const doc = clone(minimalHf) as Doc;
      doc.spec.source = { oci: { reference: 'r.example.com/m:1', ...(path !== undefined ? { path } : {}) } };
      return safeParseServedModel(doc);
    };
    const at = oci('/opt/weights/qwen');
    const none = oci();
    const models = oci('/models');
    if (!at.ok || !none.ok || !models.ok) throw new Error('expected valid documents');
    expect(describeSource(at.model.spec.source)).toBe('oci://r.example.com/m:1#/opt/weights/qwen');
    expect(describeSource(none.model.spec.source)).toBe('oci://r.example.com/m:1');
    // Without a path the identity is what it was before the field existed: no model pulls again on an upgrade.
    expect(sourceIdentity(none.model.spec.source)).toEqual({ kind: 'oci', reference: 'r.example.com/m:1' });
    expect(sameSource(at.model.spec.source, none.model.spec.source)).toBe(false);
    expect(sameSource(models.model.spec.source, none.model.spec.source)).toBe(true);
    for (const bad of ['models', '/models/', '/models/../etc', '/a b', '/']) {
      const result = oci(bad);
      expect(result.ok, bad).toBe(false);
      if (!result.ok) expect(result.issues[0]!.message).toContain('must be an absolute directory in the image');
    }
  });

  it('refuses an s3 source it could not reach or name', () => {
    const problems = (edit: (s3: Record<string, unknown>) => void) => {
      const doc = clone(s3Source) as Doc;
      edit(doc.spec.source.s3);
      const result = safeParseServedModel(doc);
      return result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);
    };
    expect(problems((s3) => (s3.bucket = 'Training_Runs'))[0]).toContain(
      'spec.source.s3.bucket: must be a bucket name',
    );
    expect(problems((s3) => (s3.endpoint = 'minio.storage:9000'))[0]).toContain(
      'spec.source.s3.endpoint: must be an http(s) URL of the store with no path',
    );
    expect(problems((s3) => (s3.prefix = '/run-42'))[0]).toContain('spec.source.s3.prefix: must be a key prefix');
    expect(problems((s3) => (s3.prefix = 'run/../42'))[0]).toContain('spec.source.s3.prefix: must be a key prefix');
    expect(problems((s3) => (s3.addressing = 'dns'))[0]).toContain(
      'spec.source.s3.addressing: must be one of path, virtual',
    );
    expect(problems((s3) => (s3.credentialsSecret = { name: 'k', key: 'x' }))[0]).toContain(
      'spec.source.s3.credentialsSecret',
    );
  });

  it('treats a new token Secret as the same source and a new revision as another', () => {
    const source = model.spec.source;
    const rotated = { huggingface: { ...source.huggingface!, tokenSecret: { name: 'hf-token-2', key: 'token' } } };
    const moved = { huggingface: { ...source.huggingface!, revision: 'main' } };
    expect(sameSource(source, rotated)).toBe(true);
    expect(sameSource(source, moved)).toBe(false);
    expect(sameSource(source, parseServedModel(pvcSource).spec.source)).toBe(false);
  });
});

describe('rules added after specs were accepted', () => {
  it('are relaxed only inside asAcceptedBefore, where a replayed update or child start is parsed again', () => {
    const doc = structuredClone(minimalHf) as Doc;
    doc.spec.engine = { args: ['--enforce-eager', 'true'] };
    expect(safeParseServedModel(doc).ok).toBe(false);
    const before = asAcceptedBefore(() => safeParseServedModel(doc));
    expect(before.ok && before.model.spec.engine.args).toEqual(['--enforce-eager', 'true']);
    expect(safeParseServedModel(doc).ok).toBe(false);
  });
});
