// `ferry serve|update|apply --dry-run=client`: the document checked as the worker checks it, and the objects Ferry would
// create for it printed (YAML, or a JSON List with -o json), as kubectl's client-side dry run does. Nothing is sent:
// no connection to Temporal or Kubernetes. The objects are the builders' own (activities/builders/), so what is printed
// is what the worker applies, but for what only the cluster decides: the root ConfigMap's uid in the children's owner
// references, and a worker's NetworkPolicy setting (the gate sidecar and a NetworkPolicy; docs/design/network-policy.md).
// `--dry-run=server` (dry-run-server.ts) asks the cluster, and prints its answer the same way.
import type { KubernetesObject } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { buildAll, objectList } from '../../activities/builders/index.js';
import type { ServedModel } from '../../workflows/contract/spec/index.js';
import type { ServerCommand } from './prepare.js';
import { inputOf } from './prepare.js';
import { EXIT } from './exit-codes.js';
import { inputErrorLines } from './format.js';
import type { CliIO } from './io.js';

/** The children's owner reference before the root exists: its uid is the API server's to give. */
const ROOT_UID = '(the root ConfigMap’s uid)';

export async function dryRunCommand(command: ServerCommand & { files: string[] }, io: CliIO): Promise<number> {
  const input = await inputOf(command, io);
  if ('error' in input || !input.docs) {
    io.stderr.write(`${inputErrorLines('error' in input ? input.error : undefined)}\n`);
    return EXIT.usage;
  }
  const objects: KubernetesObject[] = input.docs.flatMap(({ spec }) => clientObjects(spec));
  const models = input.docs.map(({ spec }) => `${spec.metadata.namespace}/${spec.metadata.name}`).join(', ');
  const clusters = [...new Set(input.docs.map(({ spec }) => spec.spec.cluster))].join(', ');
  const one = input.docs.length === 1;
  printObjects(io, command.output, objects, [
    `ferry ${command.kind} --dry-run=client: the document${one ? ' is' : 's are'} valid; the objects Ferry would create for ${models}`,
    `on cluster ${clusters}, in order. Nothing was sent. A worker with FERRY_NETWORK_POLICY=on adds a gate`,
    'sidecar to the engine and a NetworkPolicy; the owner references get the root ConfigMap’s uid when it exists.',
  ]);
  return EXIT.ok;
}

/** The objects Ferry's builders make for `model`, as far as the client can know them (no root uid yet). */
export function clientObjects(model: ServedModel): KubernetesObject[] {
  return objectList(buildAll(model, { rootUid: ROOT_UID }));
}

/**
 * Objects as a dry run prints them: `-o json` a List, `-o name` kind/name a line (as kubectl's dry run names them),
 * `-o yaml` YAML documents, and the text output the same YAML under `header`, a comment of one or more lines.
 */
export function printObjects(
  io: CliIO,
  output: 'text' | 'json' | 'yaml' | 'name',
  objects: KubernetesObject[],
  header: string[],
): void {
  if (output === 'json') {
    io.stdout.write(`${JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }, null, 2)}\n`);
  } else if (output === 'name') {
    io.stdout.write(objects.map((o) => `${o.kind!.toLowerCase()}/${o.metadata!.name}\n`).join(''));
  } else {
    const yaml = objects.map((o) => stringify(o, { lineWidth: 0 })).join('---\n');
    io.stdout.write(output === 'yaml' ? yaml : `${header.map((line) => `# ${line}\n`).join('')}${yaml}`);
  }
}
