// The workflow bundle as the worker runs it (worker/workflow-bundle.ts): zod and croner are preloaded into the SDK's
// reused V8 context — instantiated once, shared by every workflow, deep-frozen — and each workflow's own document
// schema, built on the shared zod, parses and refuses every document as it does outside the bundle. A shared module
// that wrote to its own frozen state would throw here.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import vm from 'node:vm';
import { DefaultLogger } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { safeParseServedModel } from '../../workflows/contract/spec/index.js';
import { bundleFerryWorkflows } from '../../worker/workflow-bundle.js';
import { repoRoot } from '../support/local-env.js';
import { reusedContext, type ReusedContext } from '../../bench/reused-context.js';

/** The module ID webpack gives the schema's entry (relative to the repository, the bundler's context). */
const SPEC_ID = './workflows/contract/spec/index.ts';

let loaded: ReusedContext;
let context: vm.Context;
const workflowModules = () => loaded.workflowModules();

beforeAll(async () => {
  loaded = await reusedContext(await bundleFerryWorkflows(new DefaultLogger('ERROR')));
  context = loaded.context;
}, 120_000);

/** `safeParseServedModel` of a workflow's own schema module, on `doc`, as JSON. */
function parsedInside(doc: unknown): unknown {
  workflowModules();
  context.__doc = JSON.stringify(doc);
  const text = vm.runInContext(
    `JSON.stringify(__webpack_module_cache__[${JSON.stringify(SPEC_ID)}].exports.safeParseServedModel(JSON.parse(__doc)))`,
    context,
  ) as string;
  return JSON.parse(text);
}

const examples = readdirSync(join(repoRoot, 'examples'))
  .filter((f) => f.endsWith('.yaml'))
  .map((f) => [f, parseYaml(readFileSync(join(repoRoot, 'examples', f), 'utf8')) as Record<string, unknown>] as const);
const tiny = examples.find(([f]) => f === 'tiny.yaml')![1];

/** `tiny` with `change` applied to a deep copy. */
function variant(change: (doc: Record<string, any>) => void): Record<string, unknown> {
  const doc = structuredClone(tiny) as Record<string, any>;
  change(doc);
  return doc;
}

describe('the workflow bundle with zod and croner preloaded', () => {
  it('shares zod and croner between workflows; each workflow builds its own schema on them', () => {
    const first = workflowModules();
    const second = workflowModules();
    for (const own of [first, second]) {
      expect(own.has(SPEC_ID)).toBe(true);
      expect([...own.keys()].filter((id) => /node_modules\/(zod|croner)\//.test(id))).toEqual([]);
    }
    expect(first.get(SPEC_ID)).not.toBe(second.get(SPEC_ID));
    // Both schemas are of the one zod: the same constructor behind each.
    const ctor = (own: typeof first) =>
      Object.getPrototypeOf((own.get(SPEC_ID)!.exports.servedModelSchema as object).constructor);
    expect(ctor(first)).toBe(ctor(second));
  });

  it('keeps the schema per workflow because zod 4 refuses to parse with a frozen schema', () => {
    const schema = z.object({ name: z.string() });
    expect(schema.safeParse({ name: 'a' }).success).toBe(true);
    const frozen = Object.freeze(z.object({ name: z.string() }));
    expect(() => frozen.safeParse({ name: 'a' })).toThrow(/not extensible/);
  });

  it.each(examples)('accepts %s as the worker process does', (_, doc) => {
    const inside = parsedInside(doc);
    expect(inside).toMatchObject({ ok: true });
    expect(inside).toEqual(JSON.parse(JSON.stringify(safeParseServedModel(doc))));
  });

  const refused: [string, Record<string, unknown>][] = [
    ['a name that is not a DNS label', variant((d) => (d.metadata.name = 'Bad_Name'))],
    [
      'a bidi override in an env value (escaped in the message)',
      variant((d) => (d.spec.engine.env[0].value = 'a\u202eb')),
    ],
    ['an unknown field', variant((d) => (d.spec.engine.colour = 'blue'))],
    ['a flag Ferry sets itself', variant((d) => d.spec.engine.args.push('--port=9000'))],
    ['a bad quantity', variant((d) => (d.spec.resources.memory = 'lots'))],
    ['a document that is not an object', [] as unknown as Record<string, unknown>],
  ];
  it.each(refused)('refuses %s with the same issues', (_, doc) => {
    const inside = parsedInside(doc);
    expect(inside).toMatchObject({ ok: false });
    expect(inside).toEqual(JSON.parse(JSON.stringify(safeParseServedModel(doc))));
  });
});
