// A command's ServedModel document: read from a file or stdin, parsed (YAML or JSON) and validated. Loads YAML and the
// schema (zod), so `cli/prepare.ts` imports it only for the commands that take a document.
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { ServedModel } from '../../workflows/contract/spec/index.js';
import { parseModelDocument, parseModelYaml } from '../document.js';
import { InvalidSpecError } from '../errors.js';
import { UsageError } from './args.js';
import type { CliIO } from './io.js';

/** The document in `file` (`-` is stdin) as data, and validated; bad input throws `InvalidSpecError`/`UsageError`. */
export async function readModelDocument(io: CliIO, file: string): Promise<{ doc: unknown; spec: ServedModel }> {
  const doc = await readDocument(io, file);
  return { doc, spec: parseModelDocument(doc) };
}

/** The document in `file` (`-` is stdin) as data; unreadable or malformed input is an `InvalidSpecError`/`UsageError`. */
async function readDocument(io: CliIO, file: string): Promise<unknown> {
  let text: string;
  if (file === '-') {
    // One UTF-8 stream: a character split across two chunks is decoded whole.
    const chunks: Buffer[] = [];
    for await (const chunk of io.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    text = Buffer.concat(chunks).toString('utf8');
  } else {
    try {
      text = await readFile(resolve(io.cwd, file), 'utf8');
    } catch (err) {
      throw new UsageError(
        `cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`,
      );
    }
  }
  try {
    return parseModelYaml(text);
  } catch (err) {
    if (err instanceof InvalidSpecError) throw err;
    throw new UsageError(`cannot parse ${file}: ${(err as Error).message}`);
  }
}
