// `ferry --help` and `ferry <command> --help`.
import type { CommandName } from './args.js';

const CONNECTION = `Temporal connection (same as Temporal's CLI and SDKs):
  TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE;
  flags --temporal-address, --temporal-namespace, --profile win over them. Unset values are taken from
  .ferry/local.env (written by \`npm run local:up\`) when it exists.`;

const EXIT_CODES = `Exit codes:
  0 done   1 the model failed   2 bad usage or invalid spec   3 not found   4 timeout   5 cannot connect`;

export const MAIN_HELP = `ferry: serve LLMs on Kubernetes with a durable Temporal workflow per model

Usage: ferry <command> [options]

Commands:
  serve -f FILE [--wait] [--timeout 45m]       start serving the model in FILE (same spec again: no-op)
  update -f FILE [--wait] [--timeout 45m]      change a running model's spec
  apply -f FILE [--wait] [--timeout 45m]       serve FILE if the model is not running, else update it to FILE
  status NAME [-n NS] [--cluster C]            phase, endpoint, replicas, last error, timeline
  list [-n NS | -A] [--phase P[,P]]            models in namespace default or NS; -A: every namespace
  delete NAME [-n NS] [--wait]                 tear the model down
  watch NAME [-n NS]                           follow phase changes and download progress live
  explain [PATH]                               what a field of the document means, like spec.engine.port
  completion bash|zsh|fish                     the shell's completion script: source <(ferry completion bash)

Every command takes -o json|yaml (machine-readable output), -o name (servedmodel/NAME; not watch) and -h/--help. ferry --version (-V) prints Ferry's version.

${CONNECTION}

${EXIT_CODES}
`;

export const COMMAND_HELP: Record<CommandName, string> = {
  serve: `Usage: ferry serve -f FILE [--wait] [--timeout DURATION] [-o json] [--dry-run=client|server]

Validates the ServedModel in FILE (- reads stdin) and starts its workflow. Serving the same spec again returns
the running workflow; a different spec for a running model is refused: use \`ferry update\`.

  -f, --file FILE        the ServedModel document (YAML or JSON)
  --wait                 wait until the model is Ready (exit 1 if it fails, printing the reason)
  --timeout DURATION     how long --wait may take, like 45m (default: the spec's puller.deadline plus
                         engine.startupTimeout plus 10m)
  -o json                print {workflowId, runId, started, status}
  --dry-run=client       check FILE and print the objects Ferry would create for it (-o json: a List);
                         connect to nothing (--dry-run alone means client)
  --dry-run=server       the same, checked by the worker of the model's cluster and the Kubernetes API
                         server (a dry-run apply of each object); nothing is created. Exit 2 when
                         anything is refused, each refusal on stderr
`,
  update: `Usage: ferry update -f FILE [--wait] [--timeout DURATION] [-o json] [--dry-run=client|server]

Sends FILE as the new spec of the running model it names. The model rejects invalid documents and changes of
immutable fields (name, namespace, cluster, storage class, access mode) with one line per problem. Sending the
same spec again retries a Failed model.

  -f, --file FILE        the ServedModel document (YAML or JSON; - reads stdin)
  --wait                 wait until the model is Ready at the new generation
  --timeout DURATION     how long --wait may take (default as for serve)
  -o json                print the update's result {generation, changed, sourceChanged, changes, status}
  --dry-run=client       check FILE and print the objects Ferry would create for it; connect to nothing
  --dry-run=server       the same, checked by the worker of the model's cluster and the API server
`,
  apply: `Usage: ferry apply -f FILE [--wait] [--timeout DURATION] [-o json] [--dry-run=client|server]

Makes FILE the model's spec, whether or not it is served: starts its workflow when none is running and sends
FILE as an update either way, in one request (Temporal's Update-with-Start), so a spec kept in git or a pipeline
with a new checkpoint needs no "is it running?" check. The same spec again changes nothing (it retries a Failed
model); invalid documents and changes of immutable fields are refused as by \`ferry update\`.

  -f, --file FILE        the ServedModel document (YAML or JSON; - reads stdin)
  --wait                 wait until the model is Ready at the applied generation
  --timeout DURATION     how long --wait may take (default as for serve)
  -o json                print {workflowId, runId, started, generation, changed, sourceChanged, changes, status}
  --dry-run=client       check FILE and print the objects Ferry would create for it; connect to nothing
  --dry-run=server       the same, checked by the worker of the model's cluster and the API server
`,
  status: `Usage: ferry status NAME [-n NAMESPACE] [--cluster CLUSTER] [-o json]

  -n, --namespace NS     the model's namespace (default: default)
  --cluster CLUSTER      the cluster serving it (default: found by name, else FERRY_CLUSTER or default)
  -o json                print the full status
`,
  list: `Usage: ferry list [-n NAMESPACE | -A] [--phase PHASE[,PHASE]] [--cluster CLUSTER] [--include-deleted] [-o json]

Lists the models of one namespace, as kubectl does: default without -n; every namespace with -A (a NAMESPACE
column first; -A wins over -n). Read through Temporal visibility, which can lag a second behind. AGE is printed
as kubectl prints it (90s, 5m30s, 3h20m, 3d4h, 200d).

  -n, --namespace NS     this namespace (default: default)
  -A, --all-namespaces   every namespace
  --phase PHASES         Pending, Provisioning, Downloading, Releasing, Starting, Ready, Updating, Degraded,
                         Failed, Deleting, Deleted (comma-separated)
  --cluster CLUSTER      only this cluster (default: all)
  --include-deleted      deleted models too (closed workflows)
  -o json                print an array (the same models)
`,
  delete: `Usage: ferry delete NAME [-n NAMESPACE] [--cluster CLUSTER] [--wait] [--timeout DURATION] [--reason TEXT]

Cancels whatever the model is doing and deletes everything it owns (a volume with retainOnDelete stays).
Deleting a model that is already deleted succeeds.

  --wait                 wait until everything is deleted and the workflow completed
  --timeout DURATION     how long --wait may take (default 15m)
  --reason TEXT          recorded in the model's status and timeline
`,
  watch: `Usage: ferry watch NAME [-n NAMESPACE] [--cluster CLUSTER] [--timeout DURATION] [-o json]

Prints phase changes, waiting reasons and download progress as they happen (a progress bar on a terminal,
plain lines otherwise; -o json prints one status per line, -o yaml one document per status). Exits when the model is Ready (0), Failed (1) or
Deleted (0), or on Ctrl-C (130).
`,
  explain: `Usage: ferry explain [PATH]

Says what a field of the ServedModel document is: its type, default and bounds, what it means, and the fields under
it, from the JSON Schema the package ships (schema/servedmodel.schema.json). PATH is field names joined by dots, like
spec.engine.port or spec.source.huggingface; none: the document itself. Needs no server.
`,
  completion: `Usage: ferry completion bash|zsh|fish

Prints the shell's completion script for ferry's commands, flags, files after -f, and the values of -o, --phase and
--dry-run. bash and zsh: source <(ferry completion bash) (or zsh), or save it where the shell loads completions;
fish: ferry completion fish > ~/.config/fish/completions/ferry.fish.
`,
};
