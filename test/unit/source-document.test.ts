import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { documentFromHistory, SourceDocumentError, sourceDocument } from '../../client/source-document.js';
import { InvalidSpecError } from '../../client/errors.js';
import { rolloutActionUpdate, UPDATE_NAMES, type ModelRef } from '../../workflows/contract/index.js';
import { modelDoc } from '../support/workflow-harness.js';

// The document a move serves on its target when the source's worker is gone: the caller's, or the one the source's
// history says it serves. A history is built here event by event, as the server returns it.
const ref: ModelRef = { name: 'qwen', namespace: 'models', cluster: 'east' };
const doc = (args: string[] = [], patch?: (d: ReturnType<typeof modelDoc>) => void) =>
  modelDoc((d) => {
    d.spec.cluster = 'east';
    d.spec.engine.args = args;
    patch?.(d);
  }, 'qwen');
const payloads = (value: unknown) => ({ payloads: [defaultPayloadConverter.toPayload(value)] });

type Event = Record<string, unknown>;
const started = (spec: unknown): Event => ({
  workflowExecutionStartedEventAttributes: { input: payloads({ version: 1, spec }) },
});
const updated = (name: string, arg: unknown): Event => ({
  workflowExecutionUpdateAcceptedEventAttributes: { acceptedRequest: { input: { name, args: payloads(arg) } } },
});
const signalled = (signalName: string): Event => ({ workflowExecutionSignaledEventAttributes: { signalName } });

/** A client whose model handle returns `events` as its history; anything else it is asked fails the test. */
function clientWith(events: Event[]): Client {
  const handle = { fetchHistory: () => Promise.resolve({ events }) };
  return { workflow: { getHandle: () => handle } } as unknown as Client;
}

describe('the source document from history', () => {
  it('is the spec the run started with, then each accepted update’s in order', async () => {
    expect(await documentFromHistory(clientWith([started(doc(['--a=1']))]), ref)).toMatchObject({
      spec: { engine: { args: ['--a=1'] } },
    });
    const history = [
      started(doc(['--a=1'])),
      updated(UPDATE_NAMES.update, { spec: doc(['--a=2']) }),
      signalled('ferry.modelChanged'),
      updated(UPDATE_NAMES.delete, { reason: 'x' }),
      updated(UPDATE_NAMES.update, { spec: doc(['--a=3']) }),
    ];
    expect(await documentFromHistory(clientWith(history), ref)).toMatchObject({
      spec: { engine: { args: ['--a=3'] } },
    });
  });

  it('says it cannot tell where the history leaves the spec in doubt', async () => {
    const cannot = (events: Event[]) => documentFromHistory(clientWith(events), ref);
    await expect(cannot([started(doc()), signalled(UPDATE_NAMES.update)])).rejects.toThrow(
      'it holds an update signal, which the workflow may have refused',
    );
    await expect(cannot([started(doc()), updated(rolloutActionUpdate.name, { action: 'abort' })])).rejects.toThrow(
      'it holds a rollout action',
    );
    const canary = (args: string[]) =>
      doc(args, (d) => {
        (d.spec as Record<string, unknown>).rollout = { strategy: 'Canary', steps: [{ weight: 10 }] };
      });
    // A staged rollout may end aborted and back on the spec before: nothing in the history says which.
    await expect(
      cannot([started(canary(['--a=1'])), updated(UPDATE_NAMES.update, { spec: canary(['--a=2']) })]),
    ).rejects.toThrow('a staged rollout may have gone back to an earlier spec');
    expect(await cannot([started(canary(['--a=1']))])).toMatchObject({ spec: { engine: { args: ['--a=1'] } } });
    await expect(
      cannot([{ workflowExecutionStartedEventAttributes: { input: payloads({ version: 1 }) } }]),
    ).rejects.toThrow('its start holds no document');
  });
});

describe('the source document given', () => {
  const none = {} as Client;

  it('is served as given, parsed, when it names the model', async () => {
    const given = await sourceDocument(none, ref, doc(['--given']));
    expect(given).toMatchObject({
      metadata: { name: 'qwen', namespace: 'models' },
      spec: { engine: { args: ['--given'] } },
    });
  });

  it('is refused when it names another model, or is not a valid document', async () => {
    const other = modelDoc((d) => (d.spec.cluster = 'east'), 'llama');
    await expect(sourceDocument(none, ref, other)).rejects.toThrow(
      new SourceDocumentError('the document given is for models/llama, not models/qwen'),
    );
    await expect(sourceDocument(none, ref, { kind: 'ServedModel' })).rejects.toBeInstanceOf(InvalidSpecError);
  });

  it('drops a placement: the model serves where the move sends it', async () => {
    const placed = doc([], (d) => {
      delete (d.spec as { cluster?: string }).cluster;
      (d.spec as Record<string, unknown>).placement = { clusters: ['east', 'west'] };
    });
    expect(await sourceDocument(none, ref, placed)).not.toHaveProperty('spec.placement');
  });
});
