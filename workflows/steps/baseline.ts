// The load baseline of a model with `spec.slo`: the highest concurrency one replica carries within the goal, measured
// before the model is Ready; with `spec.slo.admission`, the limit the replicas' admission sidecars enforce.
import { patchedUnlessPinned } from '../pinned.js';
import type { Activities } from '../activity-options.js';
import type { Baseline, BaselineMeasurement, ModelStatus, ServedModel } from '../contract/index.js';
import { baselineKey, baselineOf, baselineSummary } from '../status/baseline.js';
import { skipStep } from '../status/timeline.js';
import { now, slotOf, type ModelObjects, type StepContext } from './context.js';
import type { StepRow } from './table.js';

export const baselineRow: StepRow = { phase: 'engine', progress: ['baseline'] };

/** Runs with this patch measure the load baseline of a model with `spec.slo` before it is Ready (the `baseline` step). */
const LOAD_BASELINE = 'load-baseline';
/** Runs with this patch set the admission sidecar's limit from each measurement (`spec.slo.admission`). */
const ADMISSION = 'admission';
/** A retried baseline step keeps the measurement it has and applies only the admission limit again. */
const ADMISSION_RETRIED_ALONE = 'admission-retried-alone';

/**
 * The limit admission enforces for a baseline: its concurrency; none when nothing met the goal (0) or when the goal
 * held at the measurement's ceiling, where the capacity is not known and a limit would turn away what it can carry.
 */
function admissionLimitOf(baseline: { maxConcurrency: number; capped: boolean }): { maxConcurrency?: number } {
  return baseline.maxConcurrency > 0 && !baseline.capped ? { maxConcurrency: baseline.maxConcurrency } : {};
}

/** The admission limit a Deployment applied for `spec` starts with: the baseline, while it still holds for it. */
export function admissionLimit(status: ModelStatus, spec: ServedModel): { admissionLimit?: number } {
  const kept = status.baseline;
  if (spec.spec.slo?.admission !== true || !kept || kept.key !== baselineKey(spec)) return {};
  const { maxConcurrency } = admissionLimitOf(kept);
  return maxConcurrency !== undefined ? { admissionLimit: maxConcurrency } : {};
}

/**
 * The baseline step of a reconcile, for a spec with `slo` (in runs with LOAD_BASELINE): measured again only when
 * something that moves it changed since it was (its key); an update of labels, replicas or adapters keeps it.
 */
export async function baselineStep(
  ctx: StepContext,
  acts: Activities,
  objects: Omit<ModelObjects, 'sourceHash'>,
  generation: number,
): Promise<void> {
  const spec = objects.model;
  if (!spec.spec.slo || !patchedUnlessPinned(LOAD_BASELINE)) return;
  const kept = ctx.status.baseline;
  if (kept?.key === baselineKey(spec)) {
    const why = `kept: measured at generation ${kept.generation}, and nothing that moves it changed since`;
    ctx.set(skipStep(ctx.status, 'baseline', generation, now(), why));
    return;
  }
  const measured = await measure(ctx, acts, objects, generation);
  if (!measured.skipped) ctx.set({ ...ctx.status, baseline: baselineOf(measured, spec, generation, now()) });
}

/**
 * A rollout's candidate, for a spec with `slo`: its own baseline, measured on one of its replicas before the front
 * sends it a request (its `baseline` step), and with `slo.admission` its own admission limit. Throws, and so rolls the
 * candidate back, when it meets the goal not even one request at a time while the current revision does. Returned
 * for the promotion, which makes it the model's; undefined when the spec has no slo or nothing was measured.
 */
export async function candidateBaseline(
  ctx: StepContext,
  acts: Activities,
  objects: Omit<ModelObjects, 'sourceHash'>,
  generation: number,
  candidate: string,
  kept?: Baseline,
): Promise<Baseline | undefined> {
  const spec = objects.model;
  if (!spec.spec.slo || !patchedUnlessPinned(LOAD_BASELINE)) return undefined;
  if (kept?.key === baselineKey(spec)) {
    // An undo's revision, measured when it served: its limit set again on its new replicas, no load run.
    const why = `${candidate}: kept from generation ${kept.generation}, and nothing that moves it changed since`;
    if (spec.spec.slo.admission === true && patchedUnlessPinned(ADMISSION)) {
      await ctx.step(
        'baseline',
        generation,
        () => acts.short.applyAdmission({ ...objects, ...admissionLimitOf(kept) }),
        () => why,
      );
    } else {
      ctx.set(skipStep(ctx.status, 'baseline', generation, now(), why));
    }
    return kept;
  }
  const measured = await measure(ctx, acts, objects, generation, `${candidate}: `);
  if (measured.skipped) return undefined;
  const current = ctx.status.baseline;
  if (measured.maxConcurrency === 0 && current && current.maxConcurrency > 0) {
    throw new Error(
      `${candidate}: ${baselineSummary(measured)}, where ${ctx.status.revision ?? 'the current revision'} carries ${current.maxConcurrency} at once`,
    );
  }
  return baselineOf(measured, spec, generation, now());
}

/** Measures the baseline of `objects`' slot and, with `slo.admission`, sets its admission limit: one `baseline` step. */
async function measure(
  ctx: StepContext,
  acts: Activities,
  objects: Omit<ModelObjects, 'sourceHash'>,
  generation: number,
  label = '',
): Promise<BaselineMeasurement> {
  const spec = objects.model;
  const admit = spec.spec.slo?.admission === true && patchedUnlessPinned(ADMISSION);
  let done: BaselineMeasurement | undefined;
  return await ctx.step(
    'baseline',
    generation,
    async () => {
      // An attempt that failed writing the limit keeps its measurement: minutes of load are not run again for it.
      const result =
        done && patchedUnlessPinned(ADMISSION_RETRIED_ALONE)
          ? done
          : await acts.measure.measureBaseline({ model: spec, ...slotOf(objects) });
      done = result;
      // The replicas' sidecars admit what one replica was measured to carry, from now on; in place, no rollout.
      if (admit && !result.skipped) {
        await acts.short.applyAdmission({ ...objects, ...admissionLimitOf(result) });
      }
      return result;
    },
    (m) => `${label}${baselineSummary(m)}`,
  );
}
