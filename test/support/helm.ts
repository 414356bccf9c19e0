// Helm as the tests run it: the binary `local:up` installs (deploy/local/install.sh) at the version pinned in
// deploy/local/versions.env, and the worker's chart (deploy/helm/ferry-worker) rendered to objects.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from './local-env.js';

/** Where deploy/local/install.sh puts what it installs (FERRY_CACHE). */
export const cacheDir = process.env.FERRY_CACHE ?? join(homedir(), '.cache/ferry');
const versions = readFileSync(join(repoRoot, 'deploy/local/versions.env'), 'utf8');
const helmVersion = /^HELM_VERSION=(\S+)$/m.exec(versions)?.[1] ?? 'unpinned';
const helmBinary = join(cacheDir, `helm-${helmVersion}`, 'helm');

export const chartDir = join(repoRoot, 'deploy/helm/ferry-worker');

export interface HelmRun {
  status: number;
  stdout: string;
  stderr: string;
}

/** Runs helm with `args` (and `input` on stdin); never throws for helm's own failures. */
export function helm(args: string[], input?: string): HelmRun {
  if (!existsSync(helmBinary)) {
    throw new Error(`${helmBinary} is missing: run \`npm run local:up\` (or \`bash deploy/local/install.sh helm\`)`);
  }
  const run = spawnSync(helmBinary, args, { input, encoding: 'utf8' });
  if (run.error) throw run.error;
  return { status: run.status ?? 1, stdout: run.stdout, stderr: run.stderr };
}

export interface ChartRelease {
  /** Default `ferry-worker`, so the objects are named `ferry-worker`. */
  release?: string;
  /** The release namespace; default `ferry-system`. */
  namespace?: string;
  /** Values files, relative to the chart or absolute, in order. */
  valuesFiles?: string[];
  /** Values given last (on stdin), over the files. */
  values?: object;
  /** Render as `helm upgrade` would (its pre-upgrade hooks too). */
  upgrade?: boolean;
}

function templateArgs({
  release = 'ferry-worker',
  namespace = 'ferry-system',
  valuesFiles = [],
  values,
  upgrade = false,
}: ChartRelease) {
  const files = valuesFiles.flatMap((f) => ['--values', f.startsWith('/') ? f : join(chartDir, f)]);
  return [
    'template',
    release,
    chartDir,
    '--namespace',
    namespace,
    ...files,
    ...(values ? ['--values', '-'] : []),
    ...(upgrade ? ['--is-upgrade'] : []),
  ];
}

/** `helm template`'s output, as text; throws with helm's message when it refuses the values. */
export function renderChartText(chart: ChartRelease = {}): string {
  const run = helm(templateArgs(chart), chart.values ? JSON.stringify(chart.values) : undefined);
  if (run.status !== 0) throw new Error(`helm template failed: ${run.stderr}`);
  return run.stdout;
}

/** The chart's objects for `chart`, in helm's order. */
export function renderChart(chart: ChartRelease = {}): KubernetesObject[] {
  return parseAllDocuments(renderChartText(chart))
    .map((doc) => doc.toJS() as KubernetesObject | null)
    .filter((o): o is KubernetesObject => o !== null);
}

/** Helm's message when it refuses to render `chart`; throws when it renders. */
export function chartRefusal(chart: ChartRelease): string {
  const run = helm(templateArgs(chart), chart.values ? JSON.stringify(chart.values) : undefined);
  if (run.status === 0) throw new Error('helm template rendered values that should be refused');
  return run.stderr;
}
