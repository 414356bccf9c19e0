// The workflow bundle as the worker runs it (worker/workflow-bundle.ts): zod and croner are preloaded into the SDK's
// reused V8 context — instantiated once, shared by every workflow, deep-frozen — and each workflow's own document
// schema, built on the shared zod, parses and refuses every document as it does outside the bundle. A shared module
// that wrote to its own frozen state would throw here.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import vm from 'node:vm';
import { DefaultLogger } from '@temporalio/worker';
import { parseWorkflowCode } from '@temporalio/worker/lib/worker.js';
import { ReusableVMWorkflowCreator } from '@temporalio/worker/lib/workflow/reusable-vm.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { safeParseServedModel } from '../../workflows/contract/spec/index.js';
import { bundleFerryWorkflows } from '../../worker/workflow-bundle.js';
import { repoRoot } from '../support/local-env.js';

/** The module ID webpack gives the schema's entry (relative to the repository, the bundler's context). */
const SPEC_ID = './workflows/contract/spec/index.ts';

let context: vm.Context;
let creator: ReusableVMWorkflowCreator;

beforeAll(async () => {
  const bundle = await bundleFerryWorkflows(new DefaultLogger('ERROR'));
  // As the worker loads it (its source map is inline), into the creator the worker's thread makes (reuseV8Context).
  creator = await ReusableVMWorkflowCreator.create(parseWorkflowCode(bundle.code), 5_000, new Set());
  context = (creator as unknown as { _context: vm.Context })._context;
}, 120_000);

/**
 * The modules one workflow instantiates for itself, as the SDK gives each workflow its own module cache (its
 * activator's): Ferry's workflows loaded into a fresh one. The shared modules are served from the creator's cache.
 */
function workflowModules(): Map<string, { exports: Record<string, unknown> }> {
  const own = new Map<string, { exports: Record<string, unknown> }>();
  context.__TEMPORAL_ACTIVATOR__ = { moduleCache: own };
  vm.runInContext('__TEMPORAL__.importWorkflows()', context);
  return own;
}

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

describe('the workflow bundle with its schema preloaded', () => {
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
