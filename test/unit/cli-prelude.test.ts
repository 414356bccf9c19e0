// The CLI's prelude (client/cli/prepare.ts) sends `ferry update`'s and `ferry delete --cluster`'s update before the
// Temporal SDK loads, and a delete before the document's parser loads: what it imports when it loads (its static
// imports, followed through Ferry's own modules; type-only imports erased) holds neither. Without this, one import
// in a shared module would put the SDK back in front of every update, and only a benchmark would notice.
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { expect, it } from 'vitest';
import { repoRoot } from '../support/local-env.js';

/** Packages the prelude loads when it loads: everything its modules import, statically, at run time. */
function packagesLoadedBy(entry: string): Map<string, string> {
  const packages = new Map<string, string>();
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const source = readFileSync(file, 'utf8');
    // `import … from '…'` and `export … from '…'`, not `import type` / `export type`; dynamic `import()` runs later.
    for (const m of source.matchAll(/^(?:import|export)\s+(?!type\s)[^'";]*?from\s+'([^']+)'|^import\s+'([^']+)'/gm)) {
      const specifier = (m[1] ?? m[2])!;
      if (specifier.startsWith('.')) visit(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
      else if (!specifier.startsWith('node:')) packages.set(specifier, file.slice(repoRoot.length + 1));
    }
  };
  visit(join(repoRoot, entry));
  return packages;
}

it('loads no Temporal client, gRPC, protobuf, zod or YAML before it has sent the update', () => {
  const loaded = packagesLoadedBy('client/cli/prepare.ts');
  const heavy = [...loaded].filter(([name]) =>
    /^(@temporalio\/(client|proto|workflow|worker)|@grpc\/|protobufjs|zod|yaml)(\/|$)/.test(name),
  );
  expect(heavy.map(([name, by]) => `${name} (imported by ${by})`)).toEqual([]);
  // The walk sees the prelude's own imports (the hook works).
  expect([...loaded.keys()]).toEqual(expect.arrayContaining(['@temporalio/envconfig']));
});
