// A Ferry worker (worker/create-worker.ts) with stub activities on a cluster of its own, and the `ferry` CLI run as
// a child process against it: what the client integration tests drive.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { parseWorkerConfig } from '../../worker/config.js';
import { createWorker } from '../../worker/create-worker.js';
import { modelHandle } from '../../client/model-status.js';
import type { ModelRef } from '../../workflows/contract/index.js';
import { readLocalEnv, repoRoot } from './local-env.js';
import type { StubActivities } from './stub-activities.js';
import type { Doc, WorkflowHarness } from './workflow-harness.js';

export interface FerryTestWorker {
  /** The unique cluster (and so task queue) this worker serves. */
  cluster: string;
  /** A model document on this cluster with a unique name; `patch` edits it. */
  doc(patch?: (doc: Doc) => void, name?: string): Doc;
  /** Stops the worker after terminating every model the test started on its cluster. */
  close(): Promise<void>;
}

/** Starts a worker through `createWorker` (the same path as `worker/main.ts`), hosting `stub`'s activities. */
export async function startFerryWorker(
  harness: WorkflowHarness,
  stub: StubActivities,
  options: { cluster?: string; env?: Record<string, string> } = {},
): Promise<FerryTestWorker> {
  const cluster = options.cluster ?? `t-${randomBytes(4).toString('hex')}`;
  const config = parseWorkerConfig([], {
    HOME: mkdtempSync(join(tmpdir(), 'ferry-home-')),
    TEMPORAL_ADDRESS: readLocalEnv().TEMPORAL_ADDRESS,
    FERRY_CLUSTER: cluster,
    FERRY_SHUTDOWN_GRACE: '200ms',
    ...options.env,
  });
  if (config === 'help' || 'replayCheck' in config) throw new Error('unexpected mode');
  const ferry = await createWorker(config, {
    activities: stub.activities(),
    workflowBundle: harness.bundle,
    connection: harness.connection,
  });
  const running = ferry.run();
  const models: ModelRef[] = [];
  return {
    cluster,
    doc(patch, name = `m-${randomBytes(4).toString('hex')}`) {
      const doc: Doc = {
        apiVersion: 'ferry.dev/v1alpha1',
        kind: 'ServedModel',
        metadata: { name, namespace: 'models' },
        spec: {
          cluster,
          source: { huggingface: { repo: 'Qwen/Qwen2.5-0.5B-Instruct', revision: 'main' } },
          engine: { startupTimeout: '2m' },
          puller: { deadline: '10m' },
        },
      };
      patch?.(doc);
      // Wherever the patch put it, so that close() finds it.
      models.push({ cluster: doc.spec?.cluster ?? cluster, namespace: doc.metadata?.namespace ?? 'default', name });
      return doc;
    },
    async close() {
      for (const ref of models) {
        await modelHandle(harness.client, ref)
          .terminate('test finished')
          .catch(() => undefined);
      }
      ferry.shutdown();
      await running;
      await ferry.close();
    },
  };
}

const docsDir = mkdtempSync(join(tmpdir(), 'ferry-docs-'));

/** Writes `doc` as YAML to a temporary file and returns its path. */
export function writeDoc(doc: Doc): string {
  const file = join(docsDir, `${doc.metadata?.name ?? 'doc'}-${randomBytes(3).toString('hex')}.yaml`);
  writeFileSync(file, stringify(doc));
  return file;
}

export interface FerryRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The environment the CLI runs with: the local Temporal, and no `.ferry/local.env` fallback. */
function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    TEMPORAL_ADDRESS: readLocalEnv().TEMPORAL_ADDRESS,
    FERRY_LOCAL_ENV: join(docsDir, 'no-local.env'),
    ...extra,
  };
}

/** Runs `node bin/ferry.js …args` and resolves with its exit code and output. */
export function runFerry(args: string[], env?: Record<string, string>): Promise<FerryRun> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [join(repoRoot, 'bin', 'ferry.js'), ...args],
      { cwd: repoRoot, env: cliEnv(env), timeout: 300_000 },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') reject(err instanceof Error ? err : new Error(err.message));
        else resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
      },
    );
  });
}

/** `ferry-worker …args` from the sources, one of its one-shot commands (`--make-current`, `--replay-check-open`). */
export function runWorkerCommand(args: string[]): Promise<FerryRun> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', join(repoRoot, 'worker', 'main.ts'), ...args],
      {
        cwd: repoRoot,
        env: {
          ...process.env,
          HOME: mkdtempSync(join(tmpdir(), 'ferry-home-')),
          TEMPORAL_ADDRESS: readLocalEnv().TEMPORAL_ADDRESS,
        },
        timeout: 300_000,
      },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') reject(err instanceof Error ? err : new Error(err.message));
        else resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
      },
    );
  });
}

export interface FerryProcess {
  child: ChildProcess;
  /** Everything printed so far. */
  output(): { stdout: string; stderr: string };
  /** Resolves once stdout matches `pattern`. */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<void>;
  exited: Promise<FerryRun>;
}

/** Starts `node bin/ferry.js …args` and lets the test follow its output while it runs. */
export function spawnFerry(args: string[]): FerryProcess {
  const child = spawn(process.execPath, [join(repoRoot, 'bin', 'ferry.js'), ...args], { cwd: repoRoot, env: cliEnv() });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise<FerryRun>((resolve) =>
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr })),
  );
  return {
    child,
    output: () => ({ stdout, stderr }),
    exited,
    async waitForOutput(pattern, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (!pattern.test(stdout)) {
        if (Date.now() > deadline || child.exitCode !== null) {
          throw new Error(`ferry ${args.join(' ')} did not print ${pattern}; stdout:\n${stdout}\nstderr:\n${stderr}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}

/** Polls `fn` until it returns a value `accept`s (visibility lags a second or so behind the workflow). */
export async function eventually<T>(
  fn: () => Promise<T>,
  accept: (value: T) => boolean,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (accept(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 250));
  }
}
