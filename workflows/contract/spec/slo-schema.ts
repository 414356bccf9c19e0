// The latency goal and the load baseline measured against it, and the model as a Gateway API Inference Extension
// pool (docs/design/baseline.md). Pure (no Node): it is bundled into workflow code.
import { z } from 'zod';
import { dnsLabel, duration, int, mustBe, strict } from './rules.js';

const MAX_PROBE_CONCURRENCY = 4096;

export const sloSchema = strict({
  ttft: duration('2s').describe('The time to first token each request must meet, like 2s or 500ms.'),
  itl: duration('100ms').describe(
    'The inter-token latency each request must meet: the time per output token after the first, like 100ms.',
  ),
  attainment: z
    .number({ error: 'must be a number above 0 and at most 1, like 0.95' })
    .gt(0, 'must be above 0 and at most 1, like 0.95')
    .max(1, 'must be above 0 and at most 1, like 0.95')
    .default(0.95)
    .describe('The share of requests that must meet both ttft and itl, above 0 and at most 1.'),
  workload: strict({
    promptTokens: int('a whole number of tokens from 1 to 1000000')
      .min(1, 'must be at least 1')
      .max(1_000_000, 'must be at most 1000000')
      .default(256)
      .describe("The prompt length of the measurement's requests, in tokens."),
    outputTokens: int('a whole number of tokens from 1 to 100000')
      .min(1, 'must be at least 1')
      .max(100_000, 'must be at most 100000')
      .default(128)
      .describe("The answer length of the measurement's requests, in tokens (the engine is told to ignore EOS)."),
  })
    .prefault({})
    .describe('The shape of the requests the measurement sends.'),
  maxConcurrency: int(`a whole number from 1 to ${MAX_PROBE_CONCURRENCY}`)
    .min(1, `must be from 1 to ${MAX_PROBE_CONCURRENCY}`)
    .max(MAX_PROBE_CONCURRENCY, `must be from 1 to ${MAX_PROBE_CONCURRENCY}`)
    .default(256)
    .describe('The highest concurrency the measurement tries: the most requests it ever has in flight.'),
  admission: z
    .boolean({ error: 'must be true or false' })
    .default(true)
    .describe(
      'Above the measured concurrency, each replica answers HTTP 429 with Retry-After instead of queueing (an nginx sidecar in front of the engine). false: measure only.',
    ),
});

export type SloSpec = z.output<typeof sloSchema>;

// ---------------------------------------------------------------------------------------------------------------
// The model as a Gateway API Inference Extension pool (docs/design/baseline.md, section 6)

const FAILURE_MODES = ['FailClose', 'FailOpen'] as const;

export const inferencePoolSchema = strict({
  endpointPicker: strict({
    name: dnsLabel('Service name', 'epp').describe(
      "The Service of the endpoint picker (the Inference Extension's EPP) that picks this pool's endpoints, in the model's namespace. Yours: Ferry does not run it.",
    ),
    port: int('a port number from 1 to 65535')
      .min(1, 'must be from 1 to 65535')
      .max(65535, 'must be from 1 to 65535')
      .default(9002)
      .describe("The picker's ext-proc port."),
    failureMode: z
      .enum(FAILURE_MODES, { error: mustBe(...FAILURE_MODES) })
      .default('FailClose')
      .describe('What the gateway does when the picker does not answer: FailClose (refuse) or FailOpen (pick any).'),
  }).describe("The endpoint picker the gateway asks for each request's endpoint."),
});

export type InferencePoolSpec = z.output<typeof inferencePoolSchema>;
