// `ferry diff -f FILE…`: what `ferry update` or `ferry apply` would change, for each document: the spec (the
// running model's, as its workflow answers the `spec` query, against the document with its defaults filled in) and
// the Kubernetes objects Ferry's builders make for each (as `--dry-run=client` prints them). Exits as kubectl diff:
// 0 no differences, 1 differences; errors keep Ferry's codes (run.ts).
import { stringify } from 'yaml';
import type { Client } from '@temporalio/client';
import { describeModel, queryModel } from '../model-status.js';
import { ModelNotFoundError } from '../errors.js';
import { servedDocument } from '../place-model.js';
import { type ModelRef, modelRefOf, type ServedModel, specQuery } from '../../workflows/contract/index.js';
import type { CliContext } from './context.js';
import { clientObjects } from './dry-run.js';
import { EXIT } from './exit-codes.js';
import type { ModelDocument } from './read-document.js';
import { unifiedDiff } from './unified-diff.js';

export async function diffCommand(ctx: CliContext, docs: ModelDocument[]): Promise<number> {
  let differs = false;
  for (const { doc, spec: written, source } of docs) {
    // A placed document against the model on the listed cluster that serves it.
    const { spec } = await servedDocument(ctx.client, doc, written);
    const text = modelDiff(await runningSpec(ctx.client, modelRefOf(spec)), spec, source);
    if (text) ctx.io.stdout.write(text);
    differs ||= text !== '';
  }
  return differs ? EXIT.failed : EXIT.ok;
}

/** The spec the model's running workflow serves; undefined when none runs (never served, or deleted). */
async function runningSpec(client: Client, ref: ModelRef): Promise<ServedModel | undefined> {
  let runId: string;
  try {
    const execution = await describeModel(client, ref);
    if (execution.status.name !== 'RUNNING') return undefined;
    runId = execution.runId;
  } catch (err) {
    if (err instanceof ModelNotFoundError) return undefined;
    throw err;
  }
  return queryModel(client, ref, specQuery, { runId });
}

/**
 * The unified diffs from `running` (undefined: not served, so everything is new) to `next`, the document read from
 * `source`: first the spec, then each object that changes, comes or goes. Empty when nothing would change.
 */
export function modelDiff(running: ServedModel | undefined, next: ServedModel, source: string): string {
  const { namespace, name } = next.metadata;
  const from = (what: string) => (running ? `${what} (running)` : '/dev/null');
  const to = (what: string) => `${what} (${source})`;
  const spec = `ServedModel ${namespace}/${name}`;
  const parts = [unifiedDiff(running ? yaml(running) : '', yaml(next), from(spec), to(spec))];
  const before = byName(running ? clientObjects(running) : []);
  const after = byName(clientObjects(next));
  for (const key of new Set([...after.keys(), ...before.keys()])) {
    const object = `${key.split('/')[0]} ${namespace}/${key.split('/').slice(1).join('/')}`;
    const old = before.get(key);
    const now = after.get(key);
    parts.push(
      unifiedDiff(
        old ? yaml(old) : '',
        now ? yaml(now) : '',
        old ? from(object) : '/dev/null',
        now ? to(object) : '/dev/null',
      ),
    );
  }
  return parts.join('');
}

function yaml(value: unknown): string {
  return stringify(value, { lineWidth: 0 });
}

/** Objects by `Kind/name`, in the builders' order. */
function byName(objects: ReturnType<typeof clientObjects>): Map<string, unknown> {
  return new Map(objects.map((o) => [`${o.kind}/${o.metadata?.name}`, o]));
}
