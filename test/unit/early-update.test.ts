// The CLI's update sent without the SDK (client/early-update.ts): its request is, field for field, the one the SDK
// builds for `startUpdate(…, { waitForStage: 'ACCEPTED' })`, as the SDK's own protobuf definitions read it; its reading
// of the answer agrees with them on every answer the server gives, and refuses what is not one. The request on the
// wire against a real server: test/integration/client/cli.test.ts and temporal-tls.test.ts.
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
// The SDK's own address parser, internal to it: the reference Ferry's is checked against (a test may reach in).
import { splitProtoHostPort } from '@temporalio/common/lib/internal-non-workflow/parse-host-uri.js';
import { encodeUpdateRequest, hostPortOf, readUpdateResponse, STAGE_ACCEPTED } from '../../client/early-update.js';

const { UpdateWorkflowExecutionRequest, UpdateWorkflowExecutionResponse } = temporal.api.workflowservice.v1;
const { UpdateWorkflowExecutionLifecycleStage: Stage } = temporal.api.enums.v1;
const utf8 = (text: string) => Buffer.from(text, 'utf8');

describe('the early update request', () => {
  it('decodes, with the SDK definitions, to the request the SDK sends', () => {
    const arg = { spec: { metadata: { name: 'qwen', namespace: 'models' }, spec: { replicas: 2, note: 'é ✓' } } };
    const bytes = encodeUpdateRequest({
      namespace: 'default',
      workflowId: 'servedmodel/default/models/qwen',
      updateId: 'b7a1c3e0-0000-4000-8000-000000000001',
      identity: '4242@host',
      updateName: 'update',
      json: JSON.stringify(arg),
    });
    // Bytes as base64 on both sides: the SDK decodes into Buffers, this test's request into Uint8Arrays.
    const decoded = UpdateWorkflowExecutionRequest.toObject(UpdateWorkflowExecutionRequest.decode(bytes), {
      bytes: String,
    });
    // What WorkflowClient._createUpdateWorkflowRequest builds for the same call (no run ID, no headers), through the
    // default payload converter (JSON).
    const sdk = UpdateWorkflowExecutionRequest.toObject(
      UpdateWorkflowExecutionRequest.decode(
        UpdateWorkflowExecutionRequest.encode({
          namespace: 'default',
          workflowExecution: { workflowId: 'servedmodel/default/models/qwen' },
          waitPolicy: { lifecycleStage: Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED },
          request: {
            meta: { updateId: 'b7a1c3e0-0000-4000-8000-000000000001', identity: '4242@host' },
            input: {
              header: { fields: {} },
              name: 'update',
              args: { payloads: [{ metadata: { encoding: utf8('json/plain') }, data: utf8(JSON.stringify(arg)) }] },
            },
          },
        }).finish(),
      ),
      { bytes: String },
    );
    expect(decoded).toEqual(sdk);
    expect(JSON.parse(Buffer.from(decoded.request.input.args.payloads[0].data, 'base64').toString('utf8'))).toEqual(
      arg,
    );
  });

  it('carries any text and any size of argument whole', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ maxLength: 70_000 }), (id, text) => {
        const json = JSON.stringify({ text });
        const request = UpdateWorkflowExecutionRequest.decode(
          encodeUpdateRequest({
            namespace: 'ns',
            workflowId: id,
            updateId: 'u',
            identity: 'i',
            updateName: 'delete',
            json,
          }),
        );
        expect(request.workflowExecution?.workflowId).toBe(id);
        expect(Buffer.from(request.request!.input!.args!.payloads![0]!.data!).toString('utf8')).toBe(json);
      }),
      { numRuns: 200 },
    );
  });
});

describe('reading the answer', () => {
  const answer = (message: temporal.api.workflowservice.v1.IUpdateWorkflowExecutionResponse) =>
    readUpdateResponse(UpdateWorkflowExecutionResponse.encode(message).finish());
  const ref = { workflowExecution: { workflowId: 'servedmodel/default/models/qwen', runId: 'run-1' }, updateId: 'u' };

  it('an accepted update: its run, no failure', () => {
    expect(answer({ updateRef: ref, stage: Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED })).toEqual({
      runId: 'run-1',
      stage: STAGE_ACCEPTED,
      failed: false,
    });
    // Completed already, with a result: still no failure.
    expect(
      answer({
        updateRef: ref,
        stage: Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED,
        outcome: { success: { payloads: [{ data: utf8('{}') }] } },
        link: { workflowEvent: { namespace: 'default', workflowId: 'w', runId: 'run-1' } },
      }),
    ).toEqual({ runId: 'run-1', stage: 3, failed: false });
  });

  it("a completed update: its result, read as the SDK's default converter wrote it", () => {
    const completed = (value: unknown) =>
      answer({
        updateRef: ref,
        stage: Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED,
        outcome: { success: { payloads: [defaultPayloadConverter.toPayload(value)] } },
      });
    const result = { accepted: true, generation: 2, changed: true, sourceChanged: false, changes: ['spec.replicas'] };
    expect(completed(result)).toEqual({ runId: 'run-1', stage: 3, failed: false, result: { value: result } });
    expect(completed(undefined)).toEqual({ runId: 'run-1', stage: 3, failed: false, result: { value: undefined } });
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        // What JSON carries of the value (-0 is 0), as the SDK's converter reads it back.
        expect(completed(value)?.result).toEqual({
          value: defaultPayloadConverter.fromPayload(defaultPayloadConverter.toPayload(value)),
        });
      }),
      { numRuns: 200 },
    );
  });

  it('a result this module cannot read is left to the SDK', () => {
    const withPayloads = (payloads: temporal.api.common.v1.IPayload[]) =>
      answer({
        updateRef: ref,
        stage: Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED,
        outcome: { success: { payloads } },
      });
    const json = { metadata: { encoding: utf8('json/plain') }, data: utf8('{"a":1}') };
    expect(withPayloads([json])?.result).toEqual({ value: { a: 1 } });
    // Encoded by a codec (its own metadata), in another encoding, without one, or more than one payload.
    for (const payloads of [
      [{ metadata: { encoding: utf8('binary/encrypted'), 'encryption-key-id': utf8('k') }, data: utf8('x') }],
      [{ metadata: { encoding: utf8('json/plain'), 'encryption-key-id': utf8('k') }, data: utf8('{}') }],
      [{ metadata: { encoding: utf8('json/protobuf'), messageType: utf8('T') }, data: utf8('{}') }],
      [{ data: utf8('{}') }],
      [json, json],
      [],
    ]) {
      expect(withPayloads(payloads)).toEqual({ runId: 'run-1', stage: 3, failed: false });
    }
  });

  it('a rejection, and a stage short of accepted, are told apart', () => {
    expect(
      answer({
        updateRef: ref,
        stage: Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED,
        outcome: { failure: { message: 'the spec is invalid', applicationFailureInfo: { type: 'InvalidSpec' } } },
      }),
    ).toMatchObject({ failed: true });
    expect(answer({ updateRef: ref, stage: Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED })).toEqual({
      runId: 'run-1',
      stage: 1,
      failed: false,
    });
  });

  it('refuses what is not a message, and agrees with the SDK on every answer', () => {
    expect(readUpdateResponse(Uint8Array.from([0x0a, 0x05, 0x01]))).toBeUndefined(); // a field longer than the rest
    expect(readUpdateResponse(Uint8Array.from([0x0f]))).toBeUndefined(); // wire type 7
    fc.assert(
      fc.property(
        fc.record(
          {
            runId: fc.string(),
            stage: fc.integer({ min: 0, max: 3 }),
            failed: fc.option(fc.boolean(), { nil: undefined }),
          },
          { requiredKeys: ['stage'] },
        ),
        ({ runId, stage, failed }) => {
          const read = answer({
            ...(runId !== undefined ? { updateRef: { workflowExecution: { workflowId: 'w', runId } } } : {}),
            stage,
            ...(failed === undefined
              ? {}
              : { outcome: failed ? { failure: { message: 'no' } } : { success: { payloads: [] } } }),
          });
          expect(read).toEqual({ ...(runId ? { runId } : {}), stage, failed: failed === true });
        },
      ),
    );
  });
});

describe('the address', () => {
  it('reads host, port and bracketed IPv6 as the SDK does, and refuses what the SDK would not connect to', () => {
    const addresses = [
      '127.0.0.1:7233',
      'localhost',
      'temporal.example.com:443',
      'my-ns.a1b2c.tmprl.cloud:7233',
      '[::1]:7233',
      '[2001:db8::1]',
      '[::ffff:192.0.2.128]:8080',
      '10.0.0.1',
    ];
    for (const address of addresses) {
      const sdk = splitProtoHostPort(address)!;
      expect(hostPortOf(address), address).toEqual({
        hostname: sdk.hostname,
        ...(sdk.port !== undefined ? { port: sdk.port } : {}),
      });
    }
    // A scheme or a path is not an address the SDK's connection takes.
    for (const address of ['http://127.0.0.1:7233', 'dns:///host:7233', 'host:7233/path', 'host:port', '']) {
      expect(hostPortOf(address), address).toBeUndefined();
    }
  });
});
