// `ferry serve|update|apply --dry-run=server`: the document sent to the worker of the model's cluster, which checks it
// with its own rules and settings and has the Kubernetes API server validate every object by a server-side dry-run
// apply (client/dry-run-model.ts). Printed as `--dry-run=client` prints (dry-run.ts), with the objects as the API
// server would persist them; each refusal on stderr, naming the object. Nothing is created.
import type { KubernetesObject } from '@kubernetes/client-node';
import { dryRunModel, type DryRunModelResult } from '../dry-run-model.js';
import { servedDocument } from '../place-model.js';
import type { Command } from './args.js';
import type { CliContext } from './context.js';
import { printObjects } from './dry-run.js';
import { EXIT } from './exit-codes.js';
import type { ModelDocument } from './read-document.js';

type DocumentCommand = Extract<Command, { kind: 'serve' | 'update' | 'apply' }>;

export async function dryRunServerCommand(
  ctx: CliContext,
  command: DocumentCommand,
  docs: readonly ModelDocument[],
): Promise<number> {
  // One model after another, as serve and apply act on several documents; printed together, as one List.
  const results: DryRunModelResult[] = [];
  for (const { doc, spec } of docs) {
    // A placed document on the listed cluster that serves its model, else on the first listed.
    results.push(await dryRunModel(ctx.client, (await servedDocument(ctx.client, doc, spec)).doc));
  }
  const refusals = results.flatMap(refusalLines);
  if (refusals.length > 0) ctx.io.stderr.write(`${refusals.join('\n')}\n`);
  const checked = results.filter((result) => result.issues.length === 0);
  const accepted = checked.flatMap((result) =>
    result.objects.flatMap((o) => (o.object ? [o.object as KubernetesObject] : [])),
  );
  if (checked.length > 0) {
    printObjects(
      ctx.io,
      command.output,
      accepted,
      checked.flatMap((result) => headerOf(command, result)),
    );
  }
  return results.every((result) => result.accepted) ? EXIT.ok : EXIT.usage;
}

/** One line per refusal: the worker's parser's problems, or each refused object by kind and name. */
function refusalLines({ ref, issues, objects }: DryRunModelResult): string[] {
  if (issues.length > 0) {
    const n = issues.length;
    return [
      `error: the worker of cluster ${ref.cluster} refuses the document (${n} problem${n === 1 ? '' : 's'}):`,
      ...issues.map((issue) => `  ${issue.path}: ${issue.message.replace(/\s*\n\s*/g, ' ')}`),
    ];
  }
  return objects.flatMap((o) => (o.refusal ? [`error: ${o.kind}/${o.name} refused: ${o.refusal}`] : []));
}

function headerOf(command: DocumentCommand, { ref, objects }: DryRunModelResult): string[] {
  const refused = objects.filter((o) => o.refusal).length;
  const verdict =
    refused === 0
      ? 'they accepted every object Ferry would create, shown as the API server would persist it.'
      : refused === objects.length
        ? 'they refused every object Ferry would create (on stderr).'
        : `they refused ${refused} of ${objects.length} objects (on stderr); the others as the API server would persist them.`;
  return [
    `ferry ${command.kind} --dry-run=server: the worker of cluster ${ref.cluster} and the Kubernetes API server checked ` +
      `${ref.namespace}/${ref.name};`,
    `${verdict} Nothing was created.`,
  ];
}
