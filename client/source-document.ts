// The document a move serves on its target: the source's spec as it runs. Its workflow's `spec` query says it, but only
// a worker of the source's cluster answers a query; with none (a cluster whose worker is gone, docs/design/fleet.md §3)
// the document comes from the caller (`ferry move -f FILE`), or from the source's history: the spec its run started
// with, then each `update` Update its workflow accepted, in order. Where the history cannot say which spec serves (a
// rollout that may have been aborted and gone back, an `update` signal that may have been refused), it says so.
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import {
  describeRef,
  documentOnCluster,
  rolloutActionUpdate,
  specQuery,
  UPDATE_NAMES,
  type ModelRef,
  type ServedModel,
} from '../workflows/contract/index.js';
import { parseModelDocument } from './document.js';
import { FerryClientError, ModelNotFoundError } from './errors.js';
import { modelHandle, queryModel } from './model-status.js';

/** The source's document could not be had: no worker answers for it, and neither the caller nor its history gave it. */
export class SourceDocumentError extends FerryClientError {
  override readonly name = 'SourceDocumentError';
}

/** What the history's reading looks at of a document. */
interface Doc {
  spec?: { rollout?: { strategy?: unknown } };
}

/** How long the source's worker has to answer the spec query before the history is read instead. */
const SPEC_QUERY_TIMEOUT_MS = 10_000;

/**
 * The document to serve on the target: `given` when the caller gives one (it must name the same model), else the
 * source's `spec` query, else its history.
 */
export async function sourceDocument(client: Client, from: ModelRef, given?: unknown): Promise<ServedModel> {
  if (given !== undefined) {
    const model = parseModelDocument(given);
    const { name, namespace } = model.metadata;
    if (name !== from.name || namespace !== from.namespace) {
      throw new SourceDocumentError(
        `the document given is for ${namespace}/${name}, not ${from.namespace}/${from.name}`,
      );
    }
    // A placed document (spec.placement) is served on the cluster the move sends it to, as a placement serves one.
    return documentOnCluster(model, from.cluster) as ServedModel;
  }
  try {
    return await queryModel(client, from, specQuery, { timeoutMs: SPEC_QUERY_TIMEOUT_MS });
  } catch (err) {
    if (err instanceof ModelNotFoundError) throw err;
    const why = (err as Error).message ?? String(err);
    try {
      return await documentFromHistory(client, from);
    } catch (unread) {
      throw new SourceDocumentError(
        `${describeRef(from)}: no worker of cluster ${from.cluster} answered for its spec (${why}), and its history ` +
          `does not say it (${(unread as Error).message}): give its document (ferry move ${from.name} -f FILE)`,
      );
    }
  }
}

/** The spec the model's current run serves, from its history; throws where the history cannot say. */
export async function documentFromHistory(client: Client, ref: ModelRef): Promise<ServedModel> {
  const history = await modelHandle(client, ref).fetchHistory();
  let document: Doc | undefined;
  let changes = 0;
  for (const event of history.events ?? []) {
    const started = event.workflowExecutionStartedEventAttributes;
    if (started) {
      document = (payload(started.input?.payloads?.[0]) as { spec?: Doc } | undefined)?.spec;
      continue;
    }
    const signalled = event.workflowExecutionSignaledEventAttributes;
    if (signalled?.signalName === UPDATE_NAMES.update) {
      throw new Error('it holds an update signal, which the workflow may have refused');
    }
    const request = event.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input;
    if (!request) continue;
    if (request.name === rolloutActionUpdate.name)
      throw new Error('it holds a rollout action, after which the spec may differ');
    if (request.name !== UPDATE_NAMES.update) continue;
    const next = (payload(request.args?.payloads?.[0]) as { spec?: Doc } | undefined)?.spec;
    if (!next) throw new Error('an accepted update holds no document');
    changes++;
    document = next;
  }
  if (!document) throw new Error('its start holds no document (started by signal?)');
  // A rollout other than Recreate may end aborted, and the model back on the spec before: nothing in history says so.
  const staged = (d: Doc | undefined) =>
    d?.spec?.rollout?.strategy !== undefined && d.spec.rollout.strategy !== 'Recreate';
  if (changes > 0 && staged(document)) throw new Error('a staged rollout may have gone back to an earlier spec');
  return document as ServedModel;
}

function payload(p: Parameters<typeof defaultPayloadConverter.fromPayload>[0] | undefined | null): unknown {
  return p ? defaultPayloadConverter.fromPayload(p) : undefined;
}
