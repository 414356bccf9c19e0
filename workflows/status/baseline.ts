// The load baseline as status keeps it, and when it must be measured again (docs/design/baseline.md). Pure: part of
// the workflow bundle.
import type { Baseline, BaselineMeasurement, ServedModel } from '../contract/index.js';

/**
 * A hash of what can move a replica's capacity: the weights, the engine's image, arguments, environment and LoRA
 * settings, the resources, where the pods run (the GPU type), and the goal itself. Not labels, replicas, adapters,
 * the volume or the puller: a change of those keeps the baseline.
 */
export function baselineKey(model: ServedModel): string {
  const { source, engine, resources, scheduling, slo } = model.spec;
  const moving = {
    source,
    engine: {
      image: engine.image,
      args: engine.args,
      env: engine.env,
      lora: { enabled: engine.lora.enabled, maxLoras: engine.lora.maxLoras, maxLoraRank: engine.lora.maxLoraRank },
    },
    resources,
    scheduling,
    slo,
  };
  return hash64(JSON.stringify(moving));
}

/** The status' baseline from a measurement of generation `generation` of `model`. */
export function baselineOf(
  measurement: BaselineMeasurement,
  model: ServedModel,
  generation: number,
  measuredAt: string,
): Baseline {
  const slo = model.spec.slo!;
  const { maxConcurrency, capped, ttftP95Ms, itlP95Ms, attainment, pod, durationMs } = measurement;
  return {
    maxConcurrency,
    capped,
    ...(ttftP95Ms !== undefined ? { ttftP95Ms } : {}),
    ...(itlP95Ms !== undefined ? { itlP95Ms } : {}),
    ...(attainment !== undefined ? { attainment } : {}),
    goal: { ttft: slo.ttft, itl: slo.itl, attainment: slo.attainment },
    shape: slo.workload,
    generation,
    key: baselineKey(model),
    measuredAt,
    durationMs,
    probes: probeTrail(measurement),
    ...(pod ? { pod } : {}),
  };
}

/** `1✓ 2✓ 4✓ 8✓ 16✗ 12✗ 10✗ 9✗`: the concurrencies tried, in order, and whether the goal held. */
function probeTrail(measurement: BaselineMeasurement): string {
  return measurement.probes.map((p) => `${p.concurrency}${p.meets ? '✓' : '✗'}`).join(' ');
}

/** The baseline step's timeline detail: `8 requests at once (ttft p95 412 ms, itl p95 21 ms) on qwen-7d9c-x`. */
export function baselineSummary(measurement: BaselineMeasurement): string {
  if (measurement.skipped) return `not measured: ${measurement.skipped}`;
  const { maxConcurrency, capped, ttftP95Ms, itlP95Ms, pod } = measurement;
  const on = pod ? ` on ${pod}` : '';
  if (maxConcurrency === 0) {
    const why = measurement.firstError ? `; first error: ${measurement.firstError}` : '';
    return `the goal is not met even one request at a time${on}${why}`;
  }
  const at = capped ? `at least ${maxConcurrency}` : String(maxConcurrency);
  return `${at} requests at once (ttft p95 ${ttftP95Ms} ms, itl p95 ${itlP95Ms} ms)${on}`;
}

// FNV-1a over UTF-16 code units, twice with different offsets: 16 hex digits, enough to tell specs apart. Workflow
// code has no crypto module, and this needs no security, only stability.
function hash64(text: string): string {
  const fnv = (offset: number) => {
    let h = offset;
    for (let i = 0; i < text.length; i++) {
      h ^= text.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h.toString(16).padStart(8, '0');
  };
  return fnv(0x811c9dc5) + fnv(0x050c5d1f);
}
