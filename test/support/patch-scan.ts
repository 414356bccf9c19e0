// Finds the patch IDs workflow code holds: every `patched(X)`, `patchedUnlessPinned(X)` (workflows/pinned.ts) and
// `deprecatePatch(X)`, X a string literal or a constant of the same file bound to one. The patch ledger's test compares them with workflows/patches.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

export interface PatchUse {
  id: string;
  kind: 'patched' | 'deprecated';
  module: string;
}

/** The patch uses in one source file; an argument that is neither a literal nor a known constant is an error. */
export function patchUses(text: string, module: string): PatchUse[] {
  // Comments name patched() too; a line comment starts at `//` not preceded by `:` (a URL in a string).
  const source = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1');
  const constants = new Map<string, string>();
  for (const m of source.matchAll(/\bconst\s+([A-Za-z_$][\w$]*)\s*=\s*(['"])([^'"]+)\2/g)) constants.set(m[1]!, m[3]!);
  const uses: PatchUse[] = [];
  for (const m of source.matchAll(/\b(patched|patchedUnlessPinned|deprecatePatch)\(\s*([^)]*?)\s*\)/g)) {
    const [, fn, arg] = m;
    const literal = /^(['"])([^'"]+)\1$/.exec(arg!);
    const id = literal ? literal[2] : constants.get(arg!);
    if (id === undefined) throw new Error(`${module}: ${fn}(${arg}) is not a string literal or a constant of the file`);
    uses.push({ id, kind: fn === 'deprecatePatch' ? 'deprecated' : 'patched', module });
  }
  return uses;
}

/** Every patch use under `dir` (workflow code), with modules named from `root`. */
export function patchUsesUnder(root: string, dir: string): PatchUse[] {
  const uses: PatchUse[] = [];
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name === 'patches.ts' || entry.name === 'pinned.ts')
      continue;
    const path = join(entry.parentPath, entry.name);
    uses.push(...patchUses(readFileSync(path, 'utf8'), relative(root, path)));
  }
  return uses;
}

/** What differs between the code's uses and the ledger: one line each; empty when they agree. */
export function ledgerProblems(
  uses: readonly PatchUse[],
  ledger: readonly { id: string; module: string; state: 'patched' | 'deprecated' }[],
): string[] {
  const problems: string[] = [];
  const listed = new Map(ledger.map((e) => [e.id, e]));
  for (const use of uses) {
    const entry = listed.get(use.id);
    if (!entry) problems.push(`${use.module} holds patch '${use.id}', which the ledger (workflows/patches.ts) lacks`);
    else if (entry.module !== use.module)
      problems.push(`patch '${use.id}' is in ${use.module}; the ledger says ${entry.module}`);
    else if (entry.state !== use.kind)
      problems.push(`patch '${use.id}' is ${use.kind} in ${use.module}; the ledger says ${entry.state}`);
  }
  const used = new Set(uses.map((u) => u.id));
  for (const entry of ledger) {
    if (!used.has(entry.id)) problems.push(`the ledger names patch '${entry.id}', which no workflow code holds`);
  }
  const seen = new Set<string>();
  for (const entry of ledger) {
    if (seen.has(entry.id)) problems.push(`the ledger names patch '${entry.id}' twice`);
    seen.add(entry.id);
  }
  return problems;
}
