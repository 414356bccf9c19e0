// Ferry's load on the Temporal server over a benchmark's window, from the server's side: its frontend's requests by
// operation and its persistence requests by operation (the server's Prometheus metrics, TEMPORAL_METRICS_URL in
// .ferry/local.env), and with Temporal's server on PostgreSQL (`npm run local:up -- --temporal postgres`) what the
// database did: transactions, rows written and WAL (pg_stat_database, pg_stat_wal).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { localEnv } from './lib.js';

/** A counter's value by operation. */
type ByOperation = Record<string, number>;

export interface ServerSample {
  at: number;
  frontend: ByOperation;
  persistence: ByOperation;
  postgres?: PostgresSample;
}

interface PostgresSample {
  transactions: number;
  rowsInserted: number;
  rowsUpdated: number;
  rowsDeleted: number;
  walRecords: number;
  walBytes: number;
}

/** The frontend's long polls: a worker's pollers, as many per worker whatever its models. */
const POLLS = /^Poll/;
/** Persistence operations that read; every other one writes (creates, updates, appends, deletes, leases, completes). */
const READS = /^(Get|List|Read|Scan|Count|Query|Describe|Is)/;

/** Where to read the server's metrics and its database; undefined where local.env names no metrics (an old stack). */
export function temporalServer(): { metricsUrl: string; postgres?: string } | undefined {
  const env = localEnv();
  if (!env.TEMPORAL_METRICS_URL) return undefined;
  return {
    metricsUrl: env.TEMPORAL_METRICS_URL,
    ...(env.FERRY_TEMPORAL_POSTGRES ? { postgres: env.FERRY_TEMPORAL_POSTGRES } : {}),
  };
}

export async function sampleServer(server: { metricsUrl: string; postgres?: string }): Promise<ServerSample> {
  const text = await (await fetch(server.metricsUrl, { signal: AbortSignal.timeout(10_000) })).text();
  const frontend: ByOperation = {};
  const persistence: ByOperation = {};
  for (const line of text.split('\n')) {
    const m = /^(service_requests|persistence_requests)\{(.*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
    const op = labels.operation ?? '?';
    if (m[1] === 'service_requests' && labels.service_name === 'frontend')
      frontend[op] = (frontend[op] ?? 0) + Number(m[3]);
    if (m[1] === 'persistence_requests') persistence[op] = (persistence[op] ?? 0) + Number(m[3]);
  }
  return {
    at: Date.now(),
    frontend,
    persistence,
    ...(server.postgres ? { postgres: samplePostgres(server.postgres) } : {}),
  };
}

/** What the server did between two samples. */
export interface ServerDelta {
  seconds: number;
  frontendRequests: number;
  frontendPolls: number;
  persistenceWrites: number;
  persistenceReads: number;
  frontendByOperation: ByOperation;
  persistenceByOperation: ByOperation;
  postgres?: PostgresSample;
}

export function serverDelta(before: ServerSample, after: ServerSample): ServerDelta {
  const frontend = delta(before.frontend, after.frontend);
  const persistence = delta(before.persistence, after.persistence);
  const sum = (o: ByOperation, keep: (op: string) => boolean) =>
    Object.entries(o).reduce((n, [op, v]) => (keep(op) ? n + v : n), 0);
  return {
    seconds: (after.at - before.at) / 1000,
    frontendRequests: sum(frontend, (op) => !POLLS.test(op)),
    frontendPolls: sum(frontend, (op) => POLLS.test(op)),
    persistenceWrites: sum(persistence, (op) => !READS.test(op)),
    persistenceReads: sum(persistence, (op) => READS.test(op)),
    frontendByOperation: frontend,
    persistenceByOperation: persistence,
    ...(before.postgres && after.postgres ? { postgres: postgresLoad(before.postgres, after.postgres) } : {}),
  };
}

/** The figures a reader compares, from a delta: requests (polls apart), persistence writes, and the database's. */
function figures(d: ServerDelta): Record<string, number> {
  return {
    frontendRequests: d.frontendRequests,
    persistenceWrites: d.persistenceWrites,
    persistenceReads: d.persistenceReads,
    ...(d.postgres
      ? {
          postgresTransactions: d.postgres.transactions,
          postgresRowsWritten: d.postgres.rowsInserted + d.postgres.rowsUpdated + d.postgres.rowsDeleted,
          postgresWalKiB: d.postgres.walBytes / 1024,
        }
      : {}),
  };
}

const scaled = (f: Record<string, number>, by: number) =>
  Object.fromEntries(Object.entries(f).map(([k, v]) => [k, round(v * by)]));

/**
 * Ferry's load on the server: what starting a model cost (the ramp, over the models), and what a Ready model costs an
 * hour — the window's load less what the idle server did at the same rate before any model (its own housekeeping and
 * the worker's heartbeats), over the model-hours. The first includes the server's housekeeping during the ramp (at
 * `idleServerPerSecond`, a few per cent of it); the second is a difference of two noisy rates: a small negative number
 * means zero.
 */
export function serverReport(
  kind: string,
  models: number,
  idle: ServerDelta,
  ramp: ServerDelta,
  window: ServerDelta,
  safetyNet?: { looks: number; defaultLooksPerHour: number },
) {
  const idleRate = figures(idle);
  const inWindow = figures(window);
  const marginal = Object.fromEntries(
    Object.entries(inWindow).map(([k, v]) => [k, v - ((idleRate[k] ?? 0) / idle.seconds) * window.seconds]),
  );
  return {
    kind,
    perModelStarted: scaled(figures(ramp), 1 / models),
    ramp: {
      seconds: Math.round(ramp.seconds),
      frontendByOperation: ramp.frontendByOperation,
      persistenceByOperation: ramp.persistenceByOperation,
    },
    perReadyModelHour: scaled(marginal, 3600 / (models * window.seconds)),
    // With the safety net compressed (--safety-net), the window's load is its looks': what one cost, and what a quiet
    // model's looks cost an hour at the default interval.
    ...(safetyNet && safetyNet.looks > 0
      ? {
          perSafetyNetLook: scaled(marginal, 1 / safetyNet.looks),
          atDefaultSafetyNetPerModelHour: scaled(marginal, safetyNet.defaultLooksPerHour / safetyNet.looks),
        }
      : {}),
    idleServerPerSecond: { seconds: Math.round(idle.seconds), ...scaled(idleRate, 1 / idle.seconds) },
    window: {
      seconds: Math.round(window.seconds),
      ...scaled(inWindow, 1),
      frontendPollsPerSecond: round(window.frontendPolls / window.seconds),
      frontendByOperation: window.frontendByOperation,
      persistenceByOperation: window.persistenceByOperation,
    },
  };
}

function delta(before: ByOperation, after: ByOperation): ByOperation {
  const out: ByOperation = {};
  for (const [op, v] of Object.entries(after)) {
    const d = v - (before[op] ?? 0);
    if (d > 0) out[op] = d;
  }
  return Object.fromEntries(Object.entries(out).sort((a, b) => b[1] - a[1]));
}

function postgresLoad(before: PostgresSample, after: PostgresSample): PostgresSample {
  const keys = Object.keys(after) as (keyof PostgresSample)[];
  return Object.fromEntries(keys.map((k) => [k, after[k] - before[k]])) as unknown as PostgresSample;
}

/**
 * The two stores' databases, summed, and the cluster's WAL, by psql (the stack's cluster trusts this machine's
 * connections; deploy/local/temporal-server.sh). The query itself is one transaction on the `postgres` database,
 * which is not counted.
 */
function samplePostgres(address: string): PostgresSample {
  const [host, port] = address.split(':');
  const sql = [
    'select sum(xact_commit + xact_rollback), sum(tup_inserted), sum(tup_updated), sum(tup_deleted)',
    "from pg_stat_database where datname in ('temporal', 'temporal_visibility');",
    'select wal_records, wal_bytes from pg_stat_wal;',
  ].join(' ');
  const out = execFileSync(
    psql(),
    ['-h', host!, '-p', port!, '-U', 'temporal', '-d', 'postgres', '-At', '-F', ' ', '-c', sql],
    {
      encoding: 'utf8',
      env: { ...process.env, PGCONNECT_TIMEOUT: '10' },
    },
  );
  const [db, wal] = out.trim().split('\n');
  const [transactions, rowsInserted, rowsUpdated, rowsDeleted] = db!.split(' ').map(Number);
  const [walRecords, walBytes] = wal!.split(' ').map(Number);
  return {
    transactions: transactions!,
    rowsInserted: rowsInserted!,
    rowsUpdated: rowsUpdated!,
    rowsDeleted: rowsDeleted!,
    walRecords: walRecords!,
    walBytes: walBytes!,
  };
}

/** Debian's psql of the newest installed PostgreSQL, or the one on PATH. */
function psql(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  const found = versions.map((v) => `${root}/${v}/bin/psql`).find((p) => existsSync(p));
  return found ?? 'psql';
}

const round = (n: number) => Math.round(n * 100) / 100;
