// `ferry --help` and `ferry <command> --help`.
import type { CommandName } from './args.js';

const CONNECTION = `Temporal connection (same as Temporal's CLI and SDKs):
  TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS*, TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE;
  flags --temporal-address, --temporal-namespace, --profile win over them. Unset values are taken from
  .ferry/local.env (written by \`npm run local:up\`) when it exists. --request-timeout DURATION bounds each
  request to Temporal (connect, start, update, query, list), as kubectl's does: one over it exits 4, naming the
  request. 0 or none: no bound but Ferry's own (2s to connect, 10s for a status query). Waits (--wait, watch)
  are bounded by --timeout.`;

const EXIT_CODES = `Exit codes:
  0 done   1 the model failed   2 bad usage or invalid spec   3 not found   4 timeout   5 cannot connect
  With several documents, the worst of them. diff: 0 no differences, 1 differences, 2..5 an error as above.`;

const FILES = `  -f, --file FILE        a ServedModel document (YAML or JSON), a YAML stream of several (---), a directory
                         (its *.yaml, *.yml and *.json, not its subdirectories) or - (stdin); -f may be
                         given more than once. Every document is checked before any is sent.
  -n, --namespace NS     the namespace of documents that name none; one that names another is an error`;

export const MAIN_HELP = `ferry: serve LLMs on Kubernetes with a durable Temporal workflow per model

Usage: ferry <command> [options]

Commands:
  serve -f FILE [--wait] [--timeout 45m]       start serving the model in FILE (same spec again: no-op)
  update -f FILE [--wait] [--timeout 45m]      change a running model's spec
  apply -f FILE [--wait] [--timeout 45m]       serve FILE if the model is not running, else update it to FILE
  diff -f FILE                                 what update or apply would change: spec and Kubernetes objects
  status NAME [-n NS] [--cluster C] [-w]       phase, endpoint, replicas, last error, timeline; -w: and changes
  list [-n NS | -A] [--phase P[,P]] [-l SEL]   models in namespace default or NS; -A: every namespace; -w: watch
  delete NAME [-n NS] [--wait]                 tear the model down (-f FILE: the models FILE names)
  watch NAME [-n NS]                           follow phase changes and download progress live
  rollout status|approve|abort|undo NAME       where a canary stands; pass its gate; roll it back; go back
  move NAME --to CLUSTER [--wait]              serve the model on CLUSTER, then delete it where it was
  explain [PATH]                               what a field of the document means, like spec.engine.port
  completion bash|zsh|fish                     the shell's completion script: source <(ferry completion bash)

Every command takes -o json|yaml (machine-readable output), -o name (servedmodel/NAME; not watch) and -h/--help;
status and list take -o wide (more columns). ferry --version (-V) prints Ferry's version.
-f takes a file, a YAML stream of several documents, a directory or - (stdin), and may be repeated.

${CONNECTION}

${EXIT_CODES}
`;

export const COMMAND_HELP: Record<CommandName, string> = {
  serve: `Usage: ferry serve -f FILE... [-n NAMESPACE] [--wait] [--timeout DURATION] [-o json] [--dry-run=client|server]

Validates the ServedModel in FILE (- reads stdin) and starts its workflow. Serving the same spec again returns
the running workflow; a different spec for a running model is refused: use \`ferry update\`. With several
documents, each in order: one line per model (-o json, -o yaml: an array); the exit code is the worst.
With spec.placement.clusters instead of spec.cluster, the model is served on the listed cluster that serves it
already, else on the one where its replicas fit with the most GPUs left (placed once, the reason printed first);
none has room: exit 1 (NoCapacity), nothing created.

${FILES}
  --wait                 wait until the model is Ready (exit 1 if it fails, printing the reason)
  --timeout DURATION     how long --wait may take, like 45m (default: the spec's puller.deadline plus
                         engine.startupTimeout plus 10m)
  -o json                print {workflowId, runId, started, placement, status}
  --dry-run=client       check FILE and print the objects Ferry would create for it (-o json: a List);
                         connect to nothing (--dry-run alone means client)
  --dry-run=server       the same, checked by the worker of the model's cluster and the Kubernetes API
                         server (a dry-run apply of each object); nothing is created. Exit 2 when
                         anything is refused, each refusal on stderr
`,
  update: `Usage: ferry update -f FILE... [-n NAMESPACE] [--wait] [--timeout DURATION] [-o json] [--dry-run=client|server]

Sends FILE as the new spec of the running model it names. The model rejects invalid documents and changes of
immutable fields (name, namespace, cluster, storage class, access mode) with one line per problem. Sending the
same spec again retries a Failed model. Several documents: as for serve.

${FILES}
  --wait                 wait until the model is Ready at the new generation
  --timeout DURATION     how long --wait may take (default as for serve)
  -o json                print the update's result {generation, changed, sourceChanged, changes, status}
  --dry-run=client       check FILE and print the objects Ferry would create for it; connect to nothing
  --dry-run=server       the same, checked by the worker of the model's cluster and the API server
`,
  apply: `Usage: ferry apply -f FILE... [-n NAMESPACE] [--wait] [--timeout DURATION] [-o json] [--dry-run=client|server]

Makes FILE the model's spec, whether or not it is served: starts its workflow when none is running and sends
FILE as an update either way, in one request (Temporal's Update-with-Start), so a spec kept in git or a pipeline
with a new checkpoint needs no "is it running?" check. The same spec again changes nothing (it retries a Failed
model); invalid documents and changes of immutable fields are refused as by \`ferry update\`. Several documents,
and spec.placement: as for serve.

${FILES}
  --wait                 wait until the model is Ready at the applied generation
  --timeout DURATION     how long --wait may take (default as for serve)
  -o json                print {workflowId, runId, started, generation, changed, sourceChanged, changes,
                         placement, status}
  --dry-run=client       check FILE and print the objects Ferry would create for it; connect to nothing
  --dry-run=server       the same, checked by the worker of the model's cluster and the API server
`,
  status: `Usage: ferry status NAME [-n NAMESPACE] [--cluster CLUSTER] [-w | --watch-only] [--timeout DURATION] [-o json|wide]

  -n, --namespace NS     the model's namespace (default: default)
  --cluster CLUSTER      the cluster serving it (default: found by name, else FERRY_CLUSTER or default)
  -w, --watch            print the status, then a line each time it changes (phase, generation, ready replicas,
                         what it waits for, download progress), as \`kubectl get -w\`: the status is read every
                         second, less often while it cannot be read; until Ctrl-C (exit 130) or --timeout (exit 0)
  --watch-only           as -w, without the status first
  --timeout DURATION     how long -w watches, like 10m (default: until Ctrl-C)
  -o json                print the full status (-w: one status a line, each time anything in it changes)
  -o wide                also who asked for the generation, when the status last changed, and the workflow ID
`,
  list: `Usage: ferry list [-n NAMESPACE | -A] [--phase PHASE[,PHASE]] [-l SELECTOR] [--cluster CLUSTER] [--include-deleted]
                  [-w | --watch-only] [--timeout DURATION] [-o json|wide]

Lists the models of one namespace, as kubectl does: default without -n; every namespace with -A (a NAMESPACE
column first; -A wins over -n). Read through Temporal visibility, which can lag a second behind. AGE is printed
as kubectl prints it (90s, 5m30s, 3h20m, 3d4h, 200d).

  -n, --namespace NS     this namespace (default: default)
  -A, --all-namespaces   every namespace
  --phase PHASES         Pending, Provisioning, Downloading, Releasing, Starting, Ready, Idle, Updating,
                         Degraded, Failed, Deleting, Deleted (comma-separated)
  --cluster CLUSTER      only this cluster (default: all)
  --include-deleted      deleted models too (closed workflows)
  -l, --selector SEL     only models whose metadata.labels match, as kubectl's: a=b, a==b, a!=b, a in (x,y),
                         a notin (x), a, !a; commas join requirements that must all hold. Asks each model's
                         workflow for its spec (the labels are not in visibility)
  -w, --watch            print the table, then a row each time a model's phase, ready replicas or generation
                         change, or a model appears or leaves the list, as \`kubectl get -w\`: the list is read
                         every 2s, backing off to 30s while it cannot be; until Ctrl-C (exit 130) or --timeout (exit 0)
  --watch-only           as -w, without the table first
  --timeout DURATION     how long -w watches, like 10m (default: until Ctrl-C)
  -o json                print an array (the same models; -w: one model a line, each time it changes)
  -o wide                also MODEL (the served model name), SOURCE, and REASON (what it waits for, else its last
                         error)
`,
  delete: `Usage: ferry delete NAME [-n NAMESPACE] [--cluster CLUSTER] [--wait] [--timeout DURATION] [--reason TEXT]
       ferry delete -f FILE... [-n NAMESPACE] [--wait] [--timeout DURATION] [--reason TEXT]

Cancels whatever the model is doing and deletes everything it owns (a volume with retainOnDelete stays).
Deleting a model that is already deleted succeeds. With -f, the models the documents name (their name,
namespace and cluster), all at once; --wait waits for every one.

  -f, --file FILE        documents, as for serve (-f may be repeated; -n fills their namespace)

  --wait                 wait until everything is deleted and the workflow completed
  --timeout DURATION     how long --wait may take (default 15m)
  --reason TEXT          recorded in the model's status and timeline
`,
  diff: `Usage: ferry diff -f FILE... [-n NAMESPACE]

For each document, what \`ferry update\` or \`ferry apply\` would change, as unified diffs: the spec (the running
model's, from its workflow, against the document with its defaults filled in), then each Kubernetes object
Ferry makes for it (as --dry-run=client prints them) that would change, come or go. A model that is not
served: everything is new. Sends nothing.

${FILES}

Exit codes, as kubectl diff's: 0 no differences, 1 differences, 2..5 an error (as for every command; an error
other commands exit 1 with exits 2).
`,
  watch: `Usage: ferry watch NAME [-n NAMESPACE] [--cluster CLUSTER] [--timeout DURATION] [-o json]

Prints phase changes, waiting reasons and download progress as they happen (a progress bar on a terminal,
plain lines otherwise; -o json prints one status per line, -o yaml one document per status). Exits when the model is Ready (0), Failed (1) or
Deleted (0), or on Ctrl-C (130).
`,
  rollout: `Usage: ferry rollout status|approve|abort|undo NAME [-n NAMESPACE] [--cluster CLUSTER] [--revision rN] [--reason TEXT] [--keep-weights] [-o json]

A model whose spec.rollout is Canary or BlueGreen rolls a new revision out beside the one that serves
(docs/design/rollout.md).

  status                 where the rollout stands: the candidate, its step and share, each gate, each revision
  approve                pass the approval gate the rollout waits at (refused when it waits for none)
  abort                  roll the candidate back now, whatever step it is at: every request to the revision that
                         served, the candidate deleted; the model stays Ready on that revision
  undo                   return a Ready model to the revision before (kept by rollout.keepRevisions 1): it starts
                         beside the current one from its kept weights, takes every request with no gate, and the
                         current one is kept in its place (an undo of the undo returns again)

  -n, --namespace NS     the model's namespace (default: default)
  --cluster CLUSTER      the cluster serving it (default: found by name)
  --revision rN          act only if rN is the candidate (undo: the revision before); refused otherwise, so a word
                         meant for one rollout never reaches the next
  --reason TEXT          recorded on the gate and in the rollout's status
  --keep-weights         abort: keep the candidate's volume and weights (a look, or a retry that needn't pull)
  -o json                print the rollout's status (status), or {revision, action, generation?}
`,
  move: `Usage: ferry move NAME --to CLUSTER [-n NAMESPACE] [--cluster CLUSTER] [-f FILE] [--ready-timeout DURATION] [--wait [--timeout DURATION]] [-o json]
       ferry move NAME --status|--abort [-n NAMESPACE]

Moves a served model to another cluster as one durable operation (docs/design/fleet.md, section 3): the model's
spec, as it runs, is served on CLUSTER (its own weights pull there), and once that is Ready the model is deleted on
the cluster it left, as ferry delete --wait does it. The cluster it moves to needs a Ferry worker; a model of the
same name must not run there, and one move of a name runs at a time. A crash of either worker resumes the move.
The cluster it leaves needs none: without one, the model's spec is read from its workflow's history (or -f gives
it), and its delete is sent as a signal that its workflow applies once a worker is back (the move ends with the
teardown pending).

  --to CLUSTER           start the move; prints its workflow's ID
  --wait                 follow the move to its end, a line per step (exit 0 done, 1 failed, 4 --timeout)
  --timeout DURATION     how long --wait waits (the move goes on after it; default: no limit)
  -f FILE                the model's document, served on CLUSTER as it is, instead of the spec it runs with (when
                         neither its worker nor its history can say it)
  --ready-timeout D      how long the model may take to be Ready on CLUSTER (default: its download deadline, its
                         engine's startup timeout and 10 min); past it the move fails
  --status               where the model's move is: its step, each step's times, the new endpoint once Ready
  --abort                stop the move before its teardown: the model on CLUSTER is deleted and the one it left is
                         as it was; from the teardown on the move completes, and --abort says so
  -n, --namespace NS     the model's namespace (default: default)
  --cluster CLUSTER      with --to: the cluster the model runs on (default: found by name)
  -o json                print {workflowId, from, to} (--to), the move's result (--wait) or its status
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
