// The order in which `npm test` starts the files of its first group (unit and integration, four at a time).
// Vitest's own order runs one project after another, and on a clone with no cache of earlier runs (CI) the larger
// files of each first; a file of several minutes started last then holds the whole run while three workers wait. The
// longest files (their durations in CI, 2026-12-06) go first, whatever their project; the rest keep Vitest's order.
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const LONGEST_FIRST = [
  'test/integration/e2e/scaling.test.ts', // 287 s
  'test/integration/e2e/rollout.test.ts', // 262 s
  'test/integration/e2e/crash-recovery.test.ts', // 207 s
  'test/integration/workflow/schedule.test.ts', // 195 s
  'test/integration/e2e/lifecycle.test.ts', // 152 s
  'test/integration/client/cli.test.ts', // 145 s
  'test/integration/package/install.test.ts', // 145 s
  'test/integration/package/package.test.ts', // 134 s
  'test/integration/e2e/web-ui.test.ts', // 126 s
  'test/integration/e2e/watch.test.ts', // 115 s
  'test/integration/e2e/clusters.test.ts', // starts cluster east (30 s), then seven tests, about 190 s
  'test/integration/bench-slices/counted.test.ts', // four benchmarks at their smallest, about 150 s
];

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification): number => {
      if (spec.project.config.sequence.groupOrder !== 0) return LONGEST_FIRST.length;
      const at = LONGEST_FIRST.indexOf(relative(spec.project.config.root, spec.moduleId));
      return at === -1 ? LONGEST_FIRST.length : at;
    };
    const group = (spec: TestSpecification) => spec.project.config.sequence.groupOrder;
    // Array.prototype.sort is stable: files of equal rank keep the base order, and groups stay apart.
    return sorted.sort((a, b) => group(a) - group(b) || rank(a) - rank(b));
  }
}
