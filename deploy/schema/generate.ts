// Writes the generated spec files (`npm run gen:spec`): the JSON Schema and docs/spec.md, from the zod schema.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generatedFiles } from './spec-schema.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

for (const [file, text] of Object.entries(generatedFiles())) {
  mkdirSync(dirname(join(repoRoot, file)), { recursive: true });
  writeFileSync(join(repoRoot, file), text);
  console.log(`wrote ${file}`);
}
