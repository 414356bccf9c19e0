// The patch ledger: every `patched()` and `deprecatePatch()` ID in workflow code, what it guards, the release that
// introduced it and when it may move on. A unit test (test/unit/patch-ledger.test.ts) fails when code holds an ID this
// list lacks, or this list names one the code lacks. The path of a patch: docs/upgrading.md, "Patches".
//
// Not imported by workflow code: the code keeps each ID beside what it guards (a constant in the module of its step);
// this file is the list a person reads before an upgrade, and the test keeps the two the same.

/** `patched`: old histories replay the old branch. `deprecated`: no running history lacks the marker any more. */
type PatchState = 'patched' | 'deprecated';

export interface PatchEntry {
  id: string;
  /** The workflow module that calls it. */
  module: string;
  state: PatchState;
  /** What a run with the marker does that a run without it did not. */
  guards: string;
  /** The release whose code first called it (v0.1.0: the first tagged release; every patch before it is in it). */
  introduced: string;
  /** When it may move to the next state (deprecatePatch, then removal), by the rule of docs/upgrading.md. */
  retire: string;
}

/**
 * Every run of ServeModelWorkflow started — or continued as new — on a release at or after `introduced` records the
 * marker, so the old branch is needed only by runs older than that. Until Worker Versioning moves those runs on (a
 * run continues as new on the current version), that is any run still open from before: so each entry below waits on
 * "no open run older than v0.1.0", which `ferry-worker --replay-check` with the histories of every open run decides.
 */
const BEFORE_0_1_0 = 'when no open run started before v0.1.0 (docs/upgrading.md, "Retiring a patch")';

export const PATCH_LEDGER: readonly PatchEntry[] = [
  {
    id: 'stricter-spec-checks',
    module: 'workflows/serve-model.ts',
    state: 'patched',
    guards:
      'a new start is refused by the stricter spec checks; older starts replay with the spec they were accepted with',
    introduced: 'v0.1.0',
    retire: BEFORE_0_1_0,
  },
  {
    id: 'defaults-2026-12',
    module: 'workflows/serve-model.ts',
    state: 'patched',
    guards: "a new start gets the 2026-12 defaults (colocateReplicas, vLLM 0.32); older ones keep their day's",
    introduced: 'v0.1.0',
    retire: BEFORE_0_1_0,
  },
  {
    id: 'defaults-2026-12-update',
    module: 'workflows/update-spec.ts',
    state: 'patched',
    guards: "a new update gets the 2026-12 defaults; a replayed one keeps its day's",
    introduced: 'v0.1.0',
    retire: BEFORE_0_1_0,
  },
  {
    id: 'ferry-spec-rules-2026-12',
    module: 'workflows/compose/serve-as-child.ts',
    state: 'patched',
    guards: "a parent's new child start is refused by the 2026-12 rules; an older one replays as it was accepted",
    introduced: 'v0.1.0',
    retire: 'when no open parent workflow started its child before v0.1.0',
  },
  {
    id: 'split-activation-safe',
    module: 'workflows/lifecycle.ts',
    state: 'patched',
    guards: 'activity IDs named after their purpose; looks spaced inside the look; kept Degraded timers',
    introduced: 'v0.1.0',
    retire: BEFORE_0_1_0,
  },
  {
    id: 'watch-reconciles',
    module: 'workflows/watch.ts',
    state: 'patched',
    guards: "an idle model waits for the worker's watch and looks by reference, repairing drift",
    introduced: 'v0.1.0',
    retire: BEFORE_0_1_0,
  },
  {
    id: 'lora-adapters',
    module: 'workflows/steps/adapters.ts',
    state: 'patched',
    guards: 'the adapters step, and adapters loaded again on engines a look finds new',
    introduced: 'v0.1.0',
    retire: BEFORE_0_1_0,
  },
  {
    id: 'load-baseline',
    module: 'workflows/steps/baseline.ts',
    state: 'patched',
    guards: 'the baseline step of a model with spec.slo',
    introduced: 'v0.1.0',
    retire: BEFORE_0_1_0,
  },
  {
    id: 'admission',
    module: 'workflows/steps/baseline.ts',
    state: 'patched',
    guards: 'the admission limit written after each measurement (spec.slo.admission)',
    introduced: 'v0.1.0',
    retire: BEFORE_0_1_0,
  },
  {
    id: 'admission-retried-alone',
    module: 'workflows/steps/baseline.ts',
    state: 'patched',
    guards: 'a retried baseline step keeps its measurement and writes only the limit again',
    introduced: 'v0.1.0',
    retire: BEFORE_0_1_0,
  },
  {
    id: 'signalled-changes',
    module: 'workflows/signalled.ts',
    state: 'patched',
    guards:
      'the update and delete signals change the model (before, they had no handler and were ignored); a start with no spec takes it from its first update signal',
    introduced: 'v0.2.0',
    retire: 'when no open run started before v0.2.0 holds an update or delete signal it ignored',
  },
  {
    id: 'spec-bounds-signalled',
    module: 'workflows/signalled.ts',
    state: 'patched',
    guards:
      'a signalled update that only the bounds or the image grammar refuse is refused; in an older run it replays accepted',
    introduced: 'v0.2.0',
    retire: 'when no open run started before v0.2.0',
  },
  {
    id: 'signalled-delete-moved-to',
    module: 'workflows/signalled.ts',
    state: 'patched',
    guards: "a delete signal's movedTo (sent by a move whose source's worker was gone) goes into status",
    introduced: 'v0.2.0',
    retire: 'when no open run started before v0.2.0 holds a delete signal with movedTo',
  },
];
