// The replay gate as an operator runs it: `ferry-worker --replay-check DIR` on the recorded histories passes; a history
// this code cannot replay fails it, named, with the nondeterminism; a directory without histories is refused.
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/local-env.js';
import { bundleFerryWorkflows } from '../../worker/workflow-bundle.js';

const histories = join(repoRoot, 'test', 'histories');
const scratch = mkdtempSync(join(tmpdir(), 'ferry-replay-check-'));
const bundlePath = join(scratch, 'workflow-bundle.js');

/** Runs the worker's entry point as `npm run worker` does (from source here), with the bundle built once. */
function replayCheck(dir: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const args = ['--import', 'tsx', 'worker/main.ts', '--replay-check', dir, '--workflow-bundle', bundlePath];
  const child = spawn(process.execPath, args, { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

beforeAll(async () => {
  const { code } = await bundleFerryWorkflows({ log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} });
  writeFileSync(bundlePath, code);
}, 120_000);

describe('ferry-worker --replay-check', () => {
  it('passes every recorded history, one line each and a summary, exit 0', async () => {
    const { code, stdout } = await replayCheck(histories);
    const lines = stdout.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('ok   ')).length).toBeGreaterThanOrEqual(10);
    expect(lines.at(-1)).toMatch(/^\d+ replayed, 0 failed$/);
    expect(code).toBe(0);
  }, 60_000);

  it('reads histories as the Temporal CLI exports them (ProtoJSON: `temporal workflow show --output json`)', async () => {
    const { code, stdout } = await replayCheck(join(histories, 'protojson'));
    expect(stdout).toBe('ok   engine-args-rejected.json (ServeModelWorkflow)\n1 replayed, 0 failed\n');
    expect(code).toBe(0);
  }, 60_000);

  it('fails, exit 1, naming the history this code cannot replay and why', async () => {
    const dir = join(scratch, 'changed');
    mkdirSync(dir);
    copyFileSync(join(histories, 'continued-as-new.json'), join(dir, 'continued-as-new.json'));
    // A history whose first activity was another one: what replaying after a change of the step order looks like.
    const history = JSON.parse(readFileSync(join(histories, 'ready-update-delete.json'), 'utf8')) as {
      events: { activityTaskScheduledEventAttributes?: { activityType: { name: string } } }[];
    };
    history.events.find(
      (e) => e.activityTaskScheduledEventAttributes,
    )!.activityTaskScheduledEventAttributes!.activityType.name = 'applyStorage';
    writeFileSync(join(dir, 'reordered.json'), JSON.stringify(history));
    const { code, stdout } = await replayCheck(dir);
    expect(stdout).toMatch(/^ok {3}continued-as-new\.json \(ServeModelWorkflow\)$/m);
    expect(stdout).toMatch(/^FAIL reordered\.json \(ServeModelWorkflow\): .*[Nn]ondetermin/m);
    expect(stdout.trim().split('\n').at(-1)).toBe('1 replayed, 1 failed');
    expect(code).toBe(1);
  }, 60_000);

  it('refuses, exit 2, a directory without histories and a file that is not one', async () => {
    const empty = join(scratch, 'empty');
    mkdirSync(empty);
    const none = await replayCheck(empty);
    expect(none.stderr).toContain(`error: ${empty} holds no history (*.json)`);
    expect(none.code).toBe(2);

    const other = join(scratch, 'other');
    mkdirSync(other);
    writeFileSync(join(other, 'package.json'), '{"name":"x"}');
    const wrong = await replayCheck(other);
    expect(wrong.stderr).toContain('error: package.json: not a workflow history (no "events")');
    expect(wrong.code).toBe(2);

    const missing = await replayCheck(join(scratch, 'missing'));
    expect(missing.stderr).toMatch(/error: cannot read .*missing/);
    expect(missing.code).toBe(2);
  }, 60_000);
});
