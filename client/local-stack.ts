// `npm run local:up` writes `.ferry/local.env` (KUBECONFIG, TEMPORAL_ADDRESS, TEMPORAL_UI_URL); the CLI takes its
// values as defaults, so `npx ferry …` works right after it with nothing exported.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Env } from './temporal-env.js';

/**
 * The repository this file belongs to (where `npm run local:up` writes its env file): the nearest folder above it
 * with a package.json. This file is in client/ in the sources and dist/client/ in the build.
 */
const packageRoot = packageRootAbove(dirname(fileURLToPath(import.meta.url)));

function packageRootAbove(dir: string): string {
  for (let d = dir; ; d = dirname(d)) {
    if (existsSync(join(d, 'package.json'))) return d;
    if (dirname(d) === d) return resolve(dir, '..');
  }
}

export interface LocalStackEnv {
  /** The file read, if any. */
  file?: string;
  vars: Env;
}

/** Parses `KEY=value` lines; blank lines and `#` comments are skipped, one level of quotes is removed. */
export function parseEnvFile(text: string): Env {
  const vars: Env = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const match = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (!match) continue;
    const value = match[2]!.trim();
    vars[match[1]!] = /^(['"]).*\1$/.test(value) ? value.slice(1, -1) : value;
  }
  return vars;
}

/** `.ferry/local.env` of the working directory, else of this package; `FERRY_LOCAL_ENV` names another file. */
export function readLocalStackEnv(env: Env = process.env, cwd = process.cwd()): LocalStackEnv {
  const candidates = env.FERRY_LOCAL_ENV
    ? [env.FERRY_LOCAL_ENV]
    : [join(cwd, '.ferry', 'local.env'), join(packageRoot, '.ferry', 'local.env')];
  for (const file of candidates) {
    if (existsSync(file)) return { file, vars: parseEnvFile(readFileSync(file, 'utf8')) };
  }
  return { vars: {} };
}
