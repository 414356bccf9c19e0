// What the real-engine tests share: whether the local stack runs the real engine (`--engine vllm`), the local Hub's
// address and byte count, the tiny model's documents, and a look at the processes the node agent runs for a pod.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { parsePullerLine, PULLER_SCRIPT, type PullerEvent } from '../../activities/builders/index.js';
import { readEnvFile } from '../../deploy/local/component.js';
import { repoRoot } from '../support/local-env.js';
import type { Doc } from '../support/workflow-harness.js';

const run = join(repoRoot, '.ferry/run');
const cache = process.env.FERRY_CACHE ?? join(homedir(), '.cache/ferry');

/** Why the real engine cannot be tested here, or undefined when the stack runs it. */
export function realEngineMissing(): string | undefined {
  const engine = existsSync(join(run, 'engine')) ? readFileSync(join(run, 'engine'), 'utf8').trim() : 'sim';
  if (engine !== 'vllm') return 'the local stack runs the engine stand-in only: npm run local:up -- --engine vllm';
  for (const component of ['node-agent', 'hub', 's3', 'registry']) {
    const pidFile = join(run, `${component}.pid`);
    const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) : 0;
    try {
      if (pid > 0 && process.kill(pid, 0)) continue;
    } catch {
      // not running
    }
    return `the local stack's ${component} is not running: npm run local:up -- --engine vllm`;
  }
  return undefined;
}

/** The local Hub as the agent's pods reach it (deploy/local/lib.sh: pod_gateway, hub_port). */
export const HUB = `http://10.245.0.1:${process.env.FERRY_HUB_PORT ?? '16447'}`;

interface Served {
  totalBytes: number;
  repos: Record<string, { bytes: number; files: Record<string, number>; requests: number }>;
}

/** The bytes the Hub has served for a repository so far. */
export async function hubBytes(repo: string): Promise<number> {
  const served = (await (await fetch(`${HUB}/_ferry/served`)).json()) as Served;
  return served.repos[repo]?.bytes ?? 0;
}

/** The local S3 store as the agent's pods reach it (deploy/local/lib.sh: pod_gateway, s3_port). */
export const S3_STORE = `http://10.245.0.1:${process.env.FERRY_S3_PORT ?? '16449'}`;
/** The store's directory of buckets (versitygw's posix backend: a bucket is a directory, an object a file). */
export const S3_DATA = join(run, 's3/data');

/** The store's root keys (deploy/local/s3/main.ts), as a source.s3.credentialsSecret holds them. */
export function s3Keys(): { accessKeyId: string; secretAccessKey: string } {
  const vars = readEnvFile(join(run, 's3/credentials.env'));
  return { accessKeyId: vars.AWS_ACCESS_KEY_ID!, secretAccessKey: vars.AWS_SECRET_ACCESS_KEY! };
}

/** The body bytes the store's front has served for each key of a bucket so far. */
export async function s3Served(bucket: string): Promise<Record<string, number>> {
  const served = (await (await fetch(`${S3_STORE}/_ferry/served`)).json()) as Served;
  return served.repos[bucket]?.files ?? {};
}

/** The local OCI registry as the agent's pods reach it (deploy/local/lib.sh: pod_gateway, registry_port). */
export const REGISTRY = `10.245.0.1:${process.env.FERRY_REGISTRY_PORT ?? '16450'}`;
/** The registry's storage (the distribution registry's filesystem driver). */
export const REGISTRY_DATA = join(run, 'registry/data');

/** The registry's user and password (deploy/local/registry/main.ts). */
export function registryAuth(): { username: string; password: string } {
  const vars = readEnvFile(join(run, 'registry/credentials.env'));
  return { username: vars.REGISTRY_USERNAME!, password: vars.REGISTRY_PASSWORD! };
}

/** The blob bytes the registry's front has served for each digest of a repository so far. */
export async function registryServed(repository: string): Promise<Record<string, number>> {
  const served = (await (await fetch(`http://${REGISTRY}/_ferry/served`)).json()) as Served;
  return served.repos[repository]?.files ?? {};
}

/** A repository's files at a revision (its git repository in the cache), by path. */
export function repoFiles(repo: string, revision: string): Map<string, Buffer> {
  const dir = join(cache, 'hub/mirrors/models', repo);
  const listing = execFileSync('git', ['-C', dir, 'ls-tree', '-r', '--name-only', revision], { encoding: 'utf8' });
  return new Map(
    listing
      .split('\n')
      .filter(Boolean)
      .map((path) => [path, execFileSync('git', ['-C', dir, 'show', `${revision}:${path}`], { maxBuffer: 1 << 30 })]),
  );
}

/** The size of a repository's files at a revision, as the Hub serves them (its git repository in the cache). */
export function repoBytes(repo: string, revision: string): number {
  const dir = join(cache, 'hub/mirrors/models', repo);
  const listing = execFileSync('git', ['-C', dir, 'ls-tree', '-r', '-l', revision], { encoding: 'utf8' });
  return listing
    .split('\n')
    .filter(Boolean)
    .reduce((sum, line) => sum + Number(line.split(/\s+/)[3]), 0);
}

/** examples/tiny.yaml in namespace `ns`, for cluster `cluster`, changed by `edit`. */
export function tinyDoc(ns: string, cluster: string, edit: (doc: Doc) => void = () => undefined): Doc {
  const doc = parseYaml(readFileSync(join(repoRoot, 'examples/tiny.yaml'), 'utf8')) as Doc;
  doc.metadata.namespace = ns;
  doc.spec.cluster = cluster;
  edit(doc);
  return doc;
}

/** A process's parent, from /proc. */
function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // pid (comm) state ppid …: comm may hold spaces and parentheses, so read after its last ')'.
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

/**
 * The processes the node agent runs for one container of a pod (its memory cgroup's), the main process first: the
 * one whose parent is not in the container (pids wrap around, so the lowest is not always the first).
 */
export function containerPids(pod: V1Pod, container: string): number[] {
  const file = `/sys/fs/cgroup/memory/ferry-node-agent/${pod.metadata!.uid!.slice(0, 12)}-${container}/cgroup.procs`;
  if (!existsSync(file)) return [];
  const pids = readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number);
  const inside = new Set(pids);
  return pids.sort((a, b) => Number(inside.has(parentOf(a))) - Number(inside.has(parentOf(b))));
}

/** A process's command line, as its arguments. */
export function commandLine(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
}

/** The agent's containers still running for pods of `ns` (their cgroups), by `<pod uid prefix>-<container>`. */
export function agentContainers(podUids: string[]): string[] {
  const dir = '/sys/fs/cgroup/memory/ferry-node-agent';
  if (!existsSync(dir)) return [];
  const prefixes = podUids.map((uid) => uid.slice(0, 12));
  return readdirSync(dir).filter((name) => prefixes.some((p) => name.startsWith(`${p}-`)));
}

/** The host directory of a PersistentVolume, as the node agent keeps it. */
export function volumeDir(pv: string): string {
  return join(run, 'node-agent/volumes', pv);
}

/** What a run of the puller's program printed, parsed. */
export interface PullerRun {
  code: number | null;
  events: PullerEvent[];
  done?: Extract<PullerEvent, { type: 'done' }> & { verified?: number; unverified?: number };
  error?: Extract<PullerEvent, { type: 'error' }>;
  output: string;
}

/**
 * Runs the puller's program here, as a Job's container would run it, with `env` (short pauses between retries):
 * with `python` (one with huggingface_hub, for a Hub source; the standard library's suffices for the others), and
 * killed with SIGKILL, as a deleted pod's container is in the end, when `kill` aborts.
 */
export function runPuller(
  env: Record<string, string>,
  options: { python?: string; kill?: AbortSignal } = {},
): Promise<PullerRun> {
  const child = spawn(options.python ?? 'python3', ['-c', PULLER_SCRIPT], {
    env: { PATH: process.env.PATH ?? '', FERRY_PROGRESS_INTERVAL: '0.2', FERRY_RETRY_PAUSE: '0.01', ...env },
    ...(options.kill ? { signal: options.kill, killSignal: 'SIGKILL' as const } : {}),
  });
  // An aborted run ends with its close event; the abort itself is not an error here.
  child.on('error', () => undefined);
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  return new Promise((resolve) =>
    child.on('close', (code) => {
      const events = output.split('\n').flatMap((l) => parsePullerLine(l) ?? []);
      const done = events.find((e) => e.type === 'done');
      // The done line's extra fields (verified, unverified) are the puller's own, read here from the raw line.
      const raw = /^FERRY_DONE (\{.*\})$/m.exec(output)?.[1];
      resolve({
        code,
        events,
        done: done && { ...done, ...(raw ? (JSON.parse(raw) as object) : {}) },
        error: events.find((e) => e.type === 'error'),
        output,
      });
    }),
  );
}

/** Asks `model` at `endpoint` for a 4-token completion; the tokens it generated. */
export async function completionTokens(endpoint: string, model: string): Promise<number> {
  const res = await fetch(`${endpoint}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, prompt: 'hello', max_tokens: 4 }),
  });
  if (res.status !== 200) throw new Error(`${model} at ${endpoint} answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens;
}
