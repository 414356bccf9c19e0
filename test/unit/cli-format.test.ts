import { describe, expect, it } from 'vitest';
import {
  changeLine,
  downloadBar,
  errorLines,
  formatList,
  formatStatus,
  humanDuration,
  progressBar,
  table,
} from '../../client/cli/format.js';
import { StatusPrinter } from '../../client/cli/status-printer.js';
import { InvalidSpecError, ModelFailedError, SpecConflictError } from '../../client/errors.js';
import type { ModelSummary } from '../../client/list-models.js';
import type { ModelStatus } from '../../workflows/contract/index.js';
import { summarizeStatus } from '../../workflows/status/summary.js';
import { sampleBaseline } from '../support/baseline.js';

const now = new Date('2026-01-01T12:10:00Z');
const ref = { name: 'qwen', namespace: 'models', cluster: 'default' };

function status(patch: Partial<ModelStatus> = {}): ModelStatus {
  return {
    name: 'qwen',
    namespace: 'models',
    cluster: 'default',
    phase: 'Ready',
    conditions: [
      {
        type: 'Ready',
        status: 'True',
        reason: 'Ready',
        message: 'serving qwen at http://qwen.models.svc:8000 (generation 2)',
        lastTransitionTime: '2026-01-01T12:05:00Z',
        observedGeneration: 2,
      },
    ],
    endpoint: 'http://qwen.models.svc:8000',
    servedModelName: 'qwen',
    source: 'huggingface:Qwen/Qwen2.5-0.5B-Instruct@main',
    replicas: 1,
    readyReplicas: 1,
    sourceHash: 'ab12cd34'.repeat(8),
    generation: 2,
    observedGeneration: 2,
    timeline: [
      {
        step: 'download',
        generation: 1,
        startedAt: '2026-01-01T12:00:00Z',
        endedAt: '2026-01-01T12:09:30Z',
        durationMs: 570_000,
        outcome: 'Succeeded',
        detail: 'qwen-pull-ab12cd34 in 570s',
      },
      { step: 'startup', generation: 2, startedAt: '2026-01-01T12:09:30Z' },
    ],
    startedAt: '2026-01-01T12:00:00Z',
    updatedAt: '2026-01-01T12:09:30Z',
    ...patch,
  };
}

describe('table', () => {
  it('aligns columns on the widest cell and does not pad the last one', () => {
    expect(
      table(
        [
          ['A', 'BB', 'C'],
          ['long', 'x', 'last'],
        ],
        '  ',
      ),
    ).toBe('  A     BB  C\n  long  x   last');
  });
});

describe('formatStatus', () => {
  it('shows phase, endpoint, replicas, generations, source, conditions and a timeline with durations', () => {
    expect(formatStatus(status(), now)).toBe(
      [
        'qwen  (namespace models, cluster default)',
        '  phase:       Ready',
        '  endpoint:    http://qwen.models.svc:8000  (model qwen)',
        '  replicas:    1/1 ready',
        '  generation:  2 (observed 2)',
        '  source:      huggingface:Qwen/Qwen2.5-0.5B-Instruct@main  (sha256 ab12cd34)',
        '  age:         10m',
        '  conditions:',
        '    TYPE   STATUS  REASON  GEN  MESSAGE',
        '    Ready  True    Ready   2    serving qwen at http://qwen.models.svc:8000 (generation 2)',
        '  timeline:',
        '    STEP      GEN  OUTCOME    TOOK    STARTED  DETAIL',
        '    download  1    Succeeded  9m 30s  10m ago  qwen-pull-ab12cd34 in 570s',
        '    startup   2    running    30.0s…  30s ago',
      ].join('\n'),
    );
  });

  it("links the model's workflow in the Web UI when the UI's address is known", () => {
    const link = 'http://127.0.0.1:8233/namespaces/default/workflows/servedmodel%2Fdefault%2Fmodels%2Fqwen';
    const lines = formatStatus(status(), now, link).split('\n');
    expect(lines[lines.indexOf('  age:         10m') + 1]).toBe(`  web UI:      ${link}`);
    expect(formatStatus(status(), now)).not.toContain('web UI');
  });

  it("names a tenant's model's owner after its phase, and nothing for an admin's model", () => {
    const lines = formatStatus(status({ tenant: 'team-a' }), now).split('\n');
    expect(lines[lines.indexOf('  phase:       Ready') + 1]).toBe('  tenant:      team-a');
    expect(formatStatus(status(), now)).not.toContain('tenant');
  });

  it('says where a moved model serves now, and since when, after its phase', () => {
    const movedTo = { cluster: 'east', endpoint: 'http://qwen.models.svc:8000/v1', move: 'move/models/qwen' };
    const moved = status({ phase: 'Deleted', movedTo: { ...movedTo, at: '2026-01-01T12:08:00Z' } });
    const lines = formatStatus(moved, now).split('\n');
    expect(lines[lines.indexOf('  phase:       Deleted') + 1]).toBe(
      '  moved to:    cluster east at http://qwen.models.svc:8000/v1 (move/models/qwen), 2m ago',
    );
    expect(summarizeStatus(moved)).toContain(
      '- moved to cluster east at http://qwen.models.svc:8000/v1 (move/models/qwen)',
    );
    expect(formatStatus(status(), now)).not.toContain('moved to');
  });

  it('shows the load baseline and the probes that found it', () => {
    const baseline = sampleBaseline({ pod: 'qwen-7d9c-x' });
    const lines = formatStatus(status({ baseline }), now).split('\n');
    const at = lines.findIndex((l) => l.startsWith('  baseline:'));
    expect(lines.slice(at, at + 2)).toEqual([
      '  baseline:    8 requests at once per replica meet ttft ≤ 2s and itl ≤ 100ms for 95% (p95 ttft 412 ms, itl 21 ms; measured at generation 2)',
      '  probes:      1✓ 2✓ 4✓ 8✓ 16✗ 12✗ 10✗ 9✗ on qwen-7d9c-x, 5m ago',
    ]);
    expect(formatStatus(status(), now)).not.toContain('baseline');
  });

  it('shows the last error with its reason, step and generation, the waiting reason and download progress', () => {
    const text = formatStatus(
      status({
        phase: 'Downloading',
        endpoint: undefined,
        download: { bytes: 3 * 2 ** 30, totalBytes: 4 * 2 ** 30, state: 'Running', updatedAt: '2026-01-01T12:09:00Z' },
        waiting: { reason: 'Unschedulable', message: '0/2 nodes have a free GPU', since: '2026-01-01T12:08:00Z' },
        lastError: {
          reason: 'ImagePullBackOff',
          message: 'Back-off pulling image "vllm:nope"',
          at: '2026-01-01T12:07:00Z',
          step: 'rollout',
          generation: 2,
        },
      }),
      now,
    );
    expect(text).toContain('  model:       qwen');
    expect(text).toContain('  download:    3.0 GiB of 4.0 GiB (75%), Running');
    expect(text).toContain('  waiting:     Unschedulable: 0/2 nodes have a free GPU (for 2m)');
    expect(text).toContain(
      '  last error:  ImagePullBackOff (at rollout, generation 2): Back-off pulling image "vllm:nope"',
    );
  });
});

describe('formatList', () => {
  const summary = (patch: Partial<ModelSummary>): ModelSummary => ({
    ...ref,
    phase: 'Ready',
    workflowId: 'servedmodel/default/models/qwen',
    runId: 'r1',
    execution: 'RUNNING',
    startedAt: new Date('2026-01-01T12:00:00Z'),
    ...patch,
  });

  const models = () => [
    summary({ status: status() }),
    summary({ name: 'llama', phase: 'Downloading', startedAt: new Date('2026-01-01T09:55:00Z') }),
    summary({ name: 'old', phase: 'Ready', execution: 'TERMINATED', startedAt: new Date('2025-12-29T08:00:00Z') }),
  ];

  it('prints one row per model of one namespace, without a NAMESPACE column, ages as kubectl prints them', () => {
    expect(formatList(models(), now, 'models')).toBe(
      [
        'NAME   CLUSTER  PHASE               READY  GEN  ENDPOINT                     AGE',
        'qwen   default  Ready               1/1    2/2  http://qwen.models.svc:8000  10m',
        'llama  default  Downloading         ?      ?                                 135m',
        'old    default  Ready (terminated)  -      -                                 3d4h',
      ].join('\n'),
    );
  });

  it('puts a NAMESPACE column first for every namespace (-A), as kubectl does', () => {
    expect(formatList([summary({ namespace: 'default' }), ...models()], now)).toBe(
      [
        'NAMESPACE  NAME   CLUSTER  PHASE               READY  GEN  ENDPOINT                     AGE',
        'default    qwen   default  Ready               ?      ?                                 10m',
        'models     qwen   default  Ready               1/1    2/2  http://qwen.models.svc:8000  10m',
        'models     llama  default  Downloading         ?      ?                                 135m',
        'models     old    default  Ready (terminated)  -      -                                 3d4h',
      ].join('\n'),
    );
  });

  it('prints a start in the future as kubectl does: 0s within a second (clock skew), else <invalid>', () => {
    const ages = [999, 1_000, 1_999, 2_000, 60_000].map((ms) =>
      formatList([summary({ startedAt: new Date(now.getTime() + ms) })], now, 'models')
        .split('\n')[1]!
        .split(/ +/)
        .at(-1),
    );
    expect(ages).toEqual(['0s', '0s', '0s', '<invalid>', '<invalid>']);
    expect(formatList([summary({ startedAt: new Date('not a time') })], now, 'models')).toMatch(/ <unknown>$/);
  });

  it('says so when there is nothing, naming the namespace when there is one', () => {
    expect(formatList([], now, 'models')).toBe('no models in namespace models');
    expect(formatList([], now)).toBe('no models');
  });
});

describe('humanDuration', () => {
  const s = 1_000;
  const m = 60 * s;
  const h = 60 * m;
  const d = 24 * h;
  const y = 365 * d;

  it("prints a duration as kubectl's duration.HumanDuration does, at every boundary", () => {
    const cases: [number, string][] = [
      // Seconds up to two minutes; a time up to a second ahead is now (clock skew), further ahead is invalid.
      [-3 * s, '<invalid>'],
      [-2 * s, '<invalid>'],
      [-1_999, '0s'],
      [-1 * s, '0s'],
      [-1, '0s'],
      [0, '0s'],
      [999, '0s'],
      [s, '1s'],
      [59 * s, '59s'],
      [60 * s, '60s'],
      [2 * m - 1, '119s'],
      // Minutes and seconds below ten minutes; whole minutes print without seconds.
      [2 * m, '2m'],
      [2 * m + s, '2m1s'],
      [5 * m + 30 * s + 999, '5m30s'],
      [10 * m - 1, '9m59s'],
      // Minutes below three hours.
      [10 * m, '10m'],
      [10 * m + 59 * s, '10m'],
      [3 * h - 1, '179m'],
      // Hours and minutes below eight hours.
      [3 * h, '3h'],
      [3 * h + m, '3h1m'],
      [8 * h - 1, '7h59m'],
      // Hours below two days.
      [8 * h, '8h'],
      [8 * h + 30 * m, '8h'],
      [48 * h - 1, '47h'],
      // Days and hours below eight days.
      [48 * h, '2d'],
      [2 * d + h, '2d1h'],
      [8 * d - 1, '7d23h'],
      // Days below two (365-day) years.
      [8 * d, '8d'],
      [8 * d + 23 * h, '8d'],
      [2 * y - 1, '729d'],
      // Years and days below eight years.
      [2 * y, '2y'],
      [2 * y + d, '2y1d'],
      [8 * y - 1, '7y364d'],
      // Years.
      [8 * y, '8y'],
      [8 * y + 200 * d, '8y'],
      [100 * y, '100y'],
    ];
    expect(cases.map(([ms]) => [ms, humanDuration(ms)])).toEqual(cases);
  });
});

describe('progress', () => {
  it('draws a bar of the fraction done', () => {
    expect(progressBar(0, 10)).toBe('[----------]');
    expect(progressBar(0.5, 10)).toBe('[#####-----]');
    expect(progressBar(1.7, 10)).toBe('[##########]');
  });

  it('reports phase changes, download progress, waiting reasons and retried errors, and nothing when nothing changed', () => {
    const pending = status({ phase: 'Pending', generation: 1, observedGeneration: 0 });
    const downloading = status({
      phase: 'Downloading',
      generation: 1,
      download: { bytes: 2 ** 30, totalBytes: 2 ** 32, state: 'Running', updatedAt: '' },
    });
    expect(changeLine(undefined, pending)).toBe('Pending      generation 1');
    expect(changeLine(pending, pending)).toBeUndefined();
    expect(changeLine(pending, downloading)).toBe(
      'Downloading  generation 1\nDownloading  1.0 GiB of 4.0 GiB (25%), Running',
    );
    expect(changeLine(pending, downloading, { download: false })).toBe('Downloading  generation 1');
    const waiting = { ...downloading, waiting: { reason: 'Unschedulable', message: 'no GPU node', since: '' } };
    expect(changeLine(downloading, waiting)).toBe('Downloading  waiting: Unschedulable: no GPU node');
    const retrying = { ...downloading, lastError: { reason: 'Forbidden', message: 'RBAC says no', at: 't1' } };
    expect(changeLine(downloading, retrying)).toBe('Downloading  error (retrying): Forbidden: RBAC says no');
    const failed = status({
      phase: 'Failed',
      lastError: { reason: 'DeadlineExceeded', message: 'too slow', at: 't2' },
    });
    expect(changeLine(downloading, failed)).toBe('Failed       generation 2  DeadlineExceeded: too slow');
    expect(changeLine(pending, status())).toBe('Ready        generation 2  http://qwen.models.svc:8000');
    expect(downloadBar(downloading)).toBe(`  ${progressBar(0.25)} 1.0 GiB of 4.0 GiB (25%)  Running`);
    expect(downloadBar(status())).toBeUndefined();
  });

  it('prints plain timestamped lines to a pipe, and a bar redrawn in place on a terminal', () => {
    const clock = () => new Date(2026, 0, 1, 12, 0, 5);
    const downloading = (bytes: number) =>
      status({ phase: 'Downloading', download: { bytes, totalBytes: 100, state: 'Running', updatedAt: '' } });

    let piped = '';
    const plain = new StatusPrinter({ write: (t: string) => (piped += t) }, clock);
    [downloading(10), downloading(50), status()].forEach((s) => plain.update(s));
    plain.finish();
    expect(piped).toBe(
      [
        '12:00:05  Downloading  generation 2',
        '12:00:05  Downloading  10 B of 100 B (10%), Running',
        '12:00:05  Downloading  50 B of 100 B (50%), Running',
        '12:00:05  Ready        generation 2  http://qwen.models.svc:8000',
        '',
      ].join('\n'),
    );

    let screen = '';
    const tty = new StatusPrinter({ write: (t: string) => (screen += t), isTTY: true }, clock);
    [downloading(10), downloading(50), status()].forEach((s) => tty.update(s));
    tty.finish();
    const clear = '\r\x1b[2K';
    expect(screen).toBe(
      [
        '12:00:05  Downloading  generation 2\n',
        `${clear}  ${progressBar(0.1)} 10 B of 100 B (10%)  Running`,
        `${clear}  ${progressBar(0.5)} 50 B of 100 B (50%)  Running`,
        `${clear}12:00:05  Ready        generation 2  http://qwen.models.svc:8000\n`,
      ].join(''),
    );
  });
});

describe('errorLines', () => {
  it('prints a failed model as one line with its reason', () => {
    const err = new ModelFailedError(
      ref,
      { reason: 'ImagePullBackOff', message: 'Back-off pulling\nimage "x"', at: '' },
      undefined,
    );
    expect(errorLines(err)).toBe('error: ImagePullBackOff: Back-off pulling image "x"');
  });

  it('prints each spec issue on its own line, saying who rejected it', () => {
    const issues = [
      { path: 'spec.replicas', message: 'must be 0 or more' },
      { path: 'metadata.name', message: 'must not be empty' },
    ];
    expect(errorLines(new InvalidSpecError(issues), 'm.yaml')).toBe(
      'error: invalid ServedModel in m.yaml (2 problems):\n  spec.replicas: must be 0 or more\n  metadata.name: must not be empty',
    );
    expect(errorLines(new InvalidSpecError(issues.slice(0, 1), 'workflow'))).toBe(
      'error: the model rejected the update (1 problem):\n  spec.replicas: must be 0 or more',
    );
  });

  it('says what failed an error that only names itself, such as the SDK\'s "Workflow Update failed"', () => {
    const err = new Error('Workflow Update failed', { cause: new Error('the handler threw:\nboom') });
    expect(errorLines(err)).toBe('error: Workflow Update failed: the handler threw: boom');
    const repeated = new Error('lost the connection: 14 UNAVAILABLE', { cause: new Error('14 UNAVAILABLE') });
    expect(errorLines(repeated)).toBe('error: lost the connection: 14 UNAVAILABLE');
  });

  it('points a spec conflict to update and apply', () => {
    expect(errorLines(new SpecConflictError(ref, ['spec.replicas']))).toBe(
      'error: qwen (namespace models, cluster default) is already served with a different spec (it differs in spec.replicas); change it with `ferry update -f <file>` (updateModel) or `ferry apply -f <file>` (applyModel), or delete it first',
    );
  });
});

describe('ferry status of a rollout', () => {
  it('says where the rollout stands and each revision with its share', () => {
    const text = formatStatus(
      status({
        phase: 'Updating',
        revision: 'r1',
        rollout: {
          revision: 'r2',
          from: 'r1',
          strategy: 'Canary',
          generation: 2,
          state: 'Progressing',
          step: 1,
          steps: 3,
          traffic: 10,
          gates: [],
          startedAt: '2026-01-01T12:08:00Z',
        },
        revisions: [
          { name: 'r1', role: 'current', slot: 'a', source: 'huggingface:q@main', weight: 90 },
          { name: 'r2', role: 'candidate', slot: 'b', source: 'huggingface:q@v2', weight: 10 },
        ],
      }),
      now,
    );
    expect(text).toContain('  revision:    r1\n');
    expect(text).toContain('  rollout:     r2 from r1, Canary step 1 of 3 at 10%: Progressing for 2m');
    expect(text).toContain('  revisions:   r1 current 90% (slot a), r2 candidate 10% (slot b)\n');
    const back = formatStatus(
      status({
        revision: 'r1',
        rollout: {
          revision: 'r2',
          from: 'r1',
          strategy: 'Canary',
          generation: 2,
          state: 'Aborted',
          step: 1,
          steps: 3,
          traffic: 0,
          gates: [],
          message: 'step 1 (10%): gate health: CrashLoopBackOff: vllm exited 1',
          startedAt: '2026-01-01T12:08:00Z',
          endedAt: '2026-01-01T12:09:00Z',
        },
        revisions: [{ name: 'r1', role: 'current', slot: 'a', source: 'huggingface:q@main', weight: 100 }],
      }),
      now,
    );
    expect(back).toContain(
      '  rollout:     r2 from r1, Canary step 1 of 3 at 0%: Aborted 60s ago: step 1 (10%): gate health: CrashLoopBackOff: vllm exited 1',
    );
    expect(back).not.toContain('revisions:');
  });
});

describe('ferry rollout status', () => {
  it('says the candidate, its step and share, the approval or evaluation it waits for, each gate and each revision', async () => {
    const { rolloutLines } = await import('../../client/cli/rollout.js');
    const text = rolloutLines(
      status({
        phase: 'Updating',
        revision: 'r1',
        rollout: {
          revision: 'r2',
          from: 'r1',
          strategy: 'Canary',
          generation: 2,
          state: 'Progressing',
          step: 2,
          steps: 3,
          traffic: 50,
          gates: [
            {
              step: 1,
              gate: 'health',
              result: 'Passed',
              message: '1 of 1 replicas ready and answering',
              at: '2026-01-01T12:08:00Z',
            },
          ],
          awaiting: {
            gate: 'approval',
            since: '2026-01-01T12:09:00Z',
            until: '2026-01-01T12:39:00Z',
            onTimeout: 'abort',
          },
          startedAt: '2026-01-01T12:05:00Z',
        },
        revisions: [
          { name: 'r1', role: 'current', slot: 'a', source: 'huggingface:q@main', weight: 50 },
          { name: 'r2', role: 'candidate', slot: 'b', source: 'huggingface:q@v2', weight: 50 },
        ],
      }),
      now,
    );
    expect(text.split('\n')).toEqual([
      'qwen: r2 from r1, Canary, Progressing: step 2 of 3 at 50%',
      '  waiting for approval: ferry rollout approve qwen -n models (or abort); 29m left, then abort',
      '  step 1 gate health: Passed: 1 of 1 replicas ready and answering',
      '  r1  current     50%  slot a  huggingface:q@main',
      '  r2  candidate   50%  slot b  huggingface:q@v2',
    ]);
    expect(rolloutLines(status({ revision: 'r3' }), now)).toBe('qwen: no rollout yet (serving r3)');
    const evaluating = rolloutLines(
      status({
        phase: 'Updating',
        revision: 'r1',
        rollout: {
          revision: 'r2',
          from: 'r1',
          strategy: 'BlueGreen',
          generation: 2,
          state: 'Progressing',
          step: 1,
          steps: 2,
          traffic: 0,
          gates: [],
          evaluating: {
            workflowId: 'servedmodel/local/models/qwen/evaluate/r2/step-1',
            workflowType: 'evaluateCandidate',
            since: '2026-01-01T12:09:00Z',
            until: '2026-01-01T13:09:00Z',
          },
          startedAt: '2026-01-01T12:05:00Z',
        },
      }),
      now,
    );
    expect(evaluating.split('\n')).toEqual([
      'qwen: r2 from r1, BlueGreen, Progressing: step 1 of 2 at 0%',
      '  evaluating: workflow evaluateCandidate (id servedmodel/local/models/qwen/evaluate/r2/step-1); 59m left, then the gate fails',
    ]);
  });
});
