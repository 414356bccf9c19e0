import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** What `npm run local:up` wrote to `.ferry/local.env`; the process environment wins where it is set. */
export interface LocalEnv {
  KUBECONFIG: string;
  TEMPORAL_ADDRESS: string;
  /** The dev server's Web UI; Temporal's server on PostgreSQL (`--temporal postgres`) has none. */
  TEMPORAL_UI_URL?: string;
  /** The second cluster's admin kubeconfig, when the stack runs it (`npm run local:up -- --clusters 2`). */
  KUBECONFIG_EAST?: string;
}

export function readLocalEnv(): LocalEnv {
  const file = join(repoRoot, '.ferry', 'local.env');
  const fromFile: Record<string, string> = {};
  if (existsSync(file)) {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const m = /^([A-Z_]+)=(.*)$/.exec(line.trim());
      if (m) fromFile[m[1]!] = m[2]!;
    }
  }
  const pick = (k: keyof LocalEnv): string => {
    const v = process.env[k] ?? fromFile[k];
    if (!v) throw new Error(`${k} is not set and ${file} does not name it: run \`npm run local:up\` first`);
    return v;
  };
  const east = process.env.KUBECONFIG_EAST ?? fromFile.KUBECONFIG_EAST;
  const ui = process.env.TEMPORAL_UI_URL ?? fromFile.TEMPORAL_UI_URL;
  return {
    KUBECONFIG: pick('KUBECONFIG'),
    TEMPORAL_ADDRESS: pick('TEMPORAL_ADDRESS'),
    ...(ui ? { TEMPORAL_UI_URL: ui } : {}),
    ...(east ? { KUBECONFIG_EAST: east } : {}),
  };
}
