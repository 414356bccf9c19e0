import { describe, expect, it } from 'vitest';
import { parseCommand } from '../../client/cli/args.js';
import { COMMAND_HELP, MAIN_HELP } from '../../client/cli/help.js';
import { movedLine, moveLines } from '../../client/cli/move.js';
import type { MoveStatus } from '../../workflows/contract/index.js';
import { usageOf } from '../support/usage.js';

const parseError = usageOf;

describe('ferry move, parsed', () => {
  it('starts a move with --to, and follows it with --wait, bounded by --timeout; --ready-timeout bounds the target', () => {
    expect(parseCommand(['move', 'qwen', '--to', 'east'])).toMatchObject({
      kind: 'move',
      action: 'start',
      to: 'east',
      wait: false,
      ref: { name: 'qwen', namespace: 'default' },
    });
    const waited = parseCommand(['move', 'qwen', '-n', 'ml', '--cluster', 'default', '--to', 'east', '--wait']);
    expect(waited).toMatchObject({ ref: { name: 'qwen', namespace: 'ml', cluster: 'default' }, wait: true });
    expect(waited).not.toHaveProperty('timeoutMs');
    expect(
      parseCommand([
        'move',
        'qwen',
        '--to',
        'east',
        '--wait',
        '--timeout',
        '30m',
        '--ready-timeout',
        '20m',
        '-o',
        'json',
      ]),
    ).toMatchObject({ timeoutMs: 1_800_000, readyTimeoutMs: 1_200_000, output: 'json' });
  });

  it('shows or aborts the model’s move with --status or --abort, which take nothing of a start', () => {
    expect(parseCommand(['move', 'qwen', '--status', '-n', 'ml'])).toEqual(
      expect.objectContaining({ kind: 'move', action: 'status', ref: { name: 'qwen', namespace: 'ml' } }),
    );
    expect(parseCommand(['move', 'qwen', '--abort'])).toMatchObject({ action: 'abort' });
    expect(parseError(['move', 'qwen', '--abort', '--wait'])).toBe('--wait goes with --to');
    expect(parseError(['move', 'qwen', '--status', '--ready-timeout', '5m'])).toBe('--ready-timeout goes with --to');
  });

  it('takes the model’s document with -f, for a start only, one file', () => {
    expect(parseCommand(['move', 'qwen', '--to', 'east', '-f', 'qwen.yaml'])).toMatchObject({
      action: 'start',
      files: ['qwen.yaml'],
    });
    expect(parseCommand(['move', 'qwen', '--to', 'east'])).not.toHaveProperty('files');
    expect(parseError(['move', 'qwen', '--to', 'east', '-f', 'a.yaml', '-f', 'b.yaml'])).toBe(
      '-f takes one file: the document of the model that moves',
    );
    expect(parseError(['move', 'qwen', '--status', '-f', 'a.yaml'])).toBe('--file goes with --to');
    expect(COMMAND_HELP.move).toContain('-f FILE');
  });

  it('says what is wrong with a move’s command line', () => {
    expect(parseError(['move', 'qwen'])).toBe(
      'say what to do: --to CLUSTER (move the model there), --status (where its move is) or --abort (stop it)',
    );
    expect(parseError(['move', 'qwen', '--to', 'east', '--abort'])).toBe(
      'one of --to, --status and --abort, got --to and --abort',
    );
    expect(parseError(['move', '--to', 'east'])).toBe('NAME is required (the metadata.name of the model)');
    expect(parseError(['move', 'qwen', '--to', 'East_1'])).toBe(
      '--to must be a DNS label (lowercase letters, digits and "-"), got "East_1"',
    );
    expect(parseError(['move', 'qwen', '--to', 'east', '--timeout', '5m'])).toBe('--timeout bounds --wait: add --wait');
    expect(parseError(['move', 'qwen', '--to', 'east', '--ready-timeout', 'soon'])).toBe(
      '--ready-timeout must be a duration like 90s, 45m or 1h30m, got "soon"',
    );
    expect(parseError(['move', 'qwen', '--to', 'east', '--tO', 'x'])).toMatch(/did you mean --to\?$/);
  });

  it('has help of its own, and a line in the tool’s', () => {
    expect(COMMAND_HELP.move).toContain('Usage: ferry move NAME --to CLUSTER');
    expect(MAIN_HELP).toContain('move NAME --to CLUSTER [--wait]');
    expect(parseCommand(['move', '--help'])).toEqual({ kind: 'help', topic: 'move' });
  });
});

describe('ferry move, printed', () => {
  const status: MoveStatus = {
    from: { name: 'qwen', namespace: 'ml', cluster: 'default' },
    to: { name: 'qwen', namespace: 'ml', cluster: 'east' },
    step: 'teardown',
    endpoint: 'http://qwen.ml.svc:8000',
    timeline: [
      {
        step: 'serve',
        startedAt: '2026-12-07T10:00:00.000Z',
        endedAt: '2026-12-07T10:00:00.400Z',
        detail: 'ml/qwen on cluster east',
      },
      {
        step: 'ready',
        startedAt: '2026-12-07T10:00:00.400Z',
        endedAt: '2026-12-07T10:01:30.400Z',
        detail: 'generation 1',
      },
      { step: 'teardown', startedAt: '2026-12-07T10:01:30.400Z', detail: 'ml/qwen on cluster default' },
    ],
  };

  it('--status: the move, then each step with how long it took, or that it is under way', () => {
    expect(moveLines(status).split('\n')).toEqual([
      'ml/qwen: default → east, teardown; serving on east at http://qwen.ml.svc:8000',
      '  2026-12-07T10:00:00.000Z  serve    (0.4s)  ml/qwen on cluster east',
      '  2026-12-07T10:00:00.400Z  ready    (90s)  generation 1',
      '  2026-12-07T10:01:30.400Z  teardown (under way)  ml/qwen on cluster default',
    ]);
    const failed: MoveStatus = {
      ...status,
      step: 'failed',
      endpoint: undefined,
      timeline: status.timeline.slice(0, 1),
      error: { reason: 'ReadyTimeout', message: 'not Ready within 5m' },
    };
    expect(moveLines(failed).split('\n').at(-1)).toBe('  ReadyTimeout: not Ready within 5m');
  });

  it('--wait: where the model serves now, and what its old cluster kept', () => {
    const result = {
      from: status.from,
      to: status.to,
      endpoint: 'http://qwen.ml.svc:8000',
      servedModelName: 'qwen',
      deleted: ['Deployment/qwen'],
      retained: ['PersistentVolumeClaim/qwen-weights'],
    };
    expect(movedLine(result)).toBe(
      'qwen (namespace ml, cluster default) moved to cluster east: serving at http://qwen.ml.svc:8000; kept there: PersistentVolumeClaim/qwen-weights',
    );
    expect(movedLine({ ...result, retained: [], teardownPending: true })).toBe(
      'qwen (namespace ml, cluster default) moved to cluster east: serving at http://qwen.ml.svc:8000; its teardown on default goes on (that cluster has not finished it)',
    );
  });
});
