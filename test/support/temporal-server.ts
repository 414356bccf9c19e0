// A Temporal dev server of a test's own, started and stopped by the same scripts as the main one (`npm run local:up`)
// but with its own run directory and ports: restarting it does not disturb the other test files.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from './local-env.js';

export interface PrivateTemporal {
  /** host:port of its frontend. */
  address: string;
  up(): void;
  down(): void;
  /** Stops it and deletes its run directory (its SQLite database among others). */
  remove(): void;
}

/** A dev server on `port` (its UI, HTTP and metrics on the three ports after it); not started yet. */
export function privateTemporal(port: number): PrivateTemporal {
  const runDir = mkdtempSync(join(tmpdir(), 'ferry-temporal-'));
  const env = {
    ...process.env,
    FERRY_RUN_DIR: runDir,
    FERRY_TEMPORAL_PORT: String(port),
    FERRY_TEMPORAL_UI_PORT: String(port + 1),
    FERRY_TEMPORAL_HTTP_PORT: String(port + 2),
    FERRY_TEMPORAL_METRICS_PORT: String(port + 3),
  };
  const script = (name: string) =>
    execFileSync('bash', [join(repoRoot, 'deploy/local', name), 'temporal'], { env, stdio: 'pipe' });
  return {
    address: `127.0.0.1:${port}`,
    up: () => script('up.sh'),
    down: () => script('down.sh'),
    remove() {
      script('down.sh');
      rmSync(runDir, { recursive: true, force: true });
    },
  };
}
