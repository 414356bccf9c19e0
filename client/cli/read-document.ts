// A command's ServedModel documents: read from files, directories or stdin, split where a YAML stream has `---`,
// parsed (YAML or JSON) and validated, every one before anything is sent. Loads YAML and the schema (zod), so
// `cli/prepare.ts` imports it only for the commands that take documents.
import { readdir, readFile, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { ServedModel } from '../../workflows/contract/spec/index.js';
import { parseModelDocument, parseModelYaml } from '../document.js';
import { InvalidSpecError } from '../errors.js';
import { UsageError } from './args.js';
import type { CliIO } from './io.js';

/** One document of the command line, validated, with where it came from. */
export interface ModelDocument {
  /** As errors name it: `model.yaml`, `models.yaml (document 2)`, `stdin`. */
  source: string;
  /** The document as data, with `-n`'s namespace filled in where it named none. */
  doc: unknown;
  spec: ServedModel;
}

/** Every problem of the documents, each with its source: nothing is sent while there is one. */
export class DocumentErrors extends Error {
  override readonly name = 'DocumentErrors';

  constructor(readonly problems: { source?: string; error: unknown }[]) {
    super(`${problems.length} document problem${problems.length === 1 ? '' : 's'}`);
  }
}

/**
 * The documents of `files` (each a file, a directory or `-`), in order; `namespace` is -n's. Throws
 * `DocumentErrors` naming every document that cannot be read, parsed or validated.
 */
export async function readModelDocuments(
  io: CliIO,
  { files, namespace }: { files: readonly string[]; namespace?: string },
): Promise<ModelDocument[]> {
  const problems: DocumentErrors['problems'] = [];
  const documents: ModelDocument[] = [];
  for (const file of files) {
    let texts: { name: string; text: string }[];
    try {
      texts = await readSource(io, file);
    } catch (error) {
      problems.push({ error });
      continue;
    }
    for (const { name, text } of texts) {
      const parts = splitYamlStream(text);
      // A file of nothing but comments or blank lines: the parser's own "is empty" error, as for one document.
      const chunks = parts.length > 0 ? parts : [{ text, line: 1 }];
      chunks.forEach((chunk, i) => {
        const source = chunks.length > 1 ? `${name} (document ${i + 1})` : name;
        try {
          const doc = withNamespace(parseText(chunk, name), namespace);
          documents.push({ source, doc, spec: parseModelDocument(doc) });
        } catch (error) {
          problems.push({ source, error });
        }
      });
    }
  }
  if (problems.length > 0) throw new DocumentErrors(problems);
  return documents;
}

/**
 * The documents of a YAML stream, split as kubectl splits one: at each line that starts with `---` followed by
 * nothing but spaces or a comment. Documents of only blank lines and comments are left out, as kubectl skips them;
 * `line` is where each starts in `text` (1-based), so that a problem's line is the file's.
 */
export function splitYamlStream(text: string): { text: string; line: number }[] {
  const documents: { text: string; line: number }[] = [];
  const lines = text.split('\n');
  let start = 0;
  const close = (end: number) => {
    const part = lines.slice(start, end);
    if (part.some((l) => !/^\s*(#.*)?$/.test(l))) documents.push({ text: part.join('\n'), line: start + 1 });
  };
  lines.forEach((line, i) => {
    if (/^---(\s*$|\s+#)/.test(line)) {
      close(i);
      start = i + 1;
    }
  });
  close(lines.length);
  return documents;
}

/** One document's text as data: YAML problems as issues with the file's line numbers, other failures as usage. */
function parseText(chunk: { text: string; line: number }, name: string): unknown {
  try {
    // Blank lines before it keep the parser's line numbers those of the file.
    return parseModelYaml(`${'\n'.repeat(chunk.line - 1)}${chunk.text}`);
  } catch (err) {
    if (err instanceof InvalidSpecError) throw err;
    throw new UsageError(`cannot parse ${name}: ${(err as Error).message}`);
  }
}

/**
 * `doc` with `-n`'s namespace: filled in where it names none; naming another is an error, as kubectl's "the
 * namespace from the provided object does not match the namespace sent on the request".
 */
function withNamespace(doc: unknown, namespace: string | undefined): unknown {
  if (namespace === undefined || !isObject(doc)) return doc;
  const metadata = doc.metadata;
  if (metadata !== undefined && !isObject(metadata)) return doc; // The schema says what is wrong with it.
  const own = metadata?.namespace;
  if (own === undefined) return { ...doc, metadata: { ...metadata, namespace } };
  if (own !== namespace) {
    throw new InvalidSpecError([
      {
        path: 'metadata.namespace',
        message:
          `the namespace of the document, ${JSON.stringify(own)}, does not match the namespace given with -n, ` +
          `${JSON.stringify(namespace)}: drop -n, or give -n ${typeof own === 'string' ? own : 'NAMESPACE'}`,
      },
    ]);
  }
  return doc;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The texts `file` names: itself, stdin for `-`, or a directory's *.yaml, *.yml and *.json files, sorted. */
async function readSource(io: CliIO, file: string): Promise<{ name: string; text: string }[]> {
  if (file === '-') return [{ name: 'stdin', text: await readStdin(io) }];
  const path = resolve(io.cwd, file);
  let directory = false;
  try {
    directory = (await stat(path)).isDirectory();
  } catch (err) {
    throw unreadable(file, err);
  }
  if (!directory) return [{ name: file, text: await readText(path, file) }];
  // As `kubectl apply -f DIR`: the directory's own files, not its subdirectories'.
  const entries = await readdir(path, { withFileTypes: true }).catch((err: unknown) => {
    throw unreadable(file, err);
  });
  const names = entries
    .filter((e) => !e.isDirectory() && /\.(ya?ml|json)$/.test(e.name))
    .map((e) => e.name)
    .sort();
  if (names.length === 0) throw new UsageError(`no .yaml, .yml or .json files in the directory ${file}`);
  return Promise.all(
    names.map(async (name) => ({ name: join(file, name), text: await readText(join(path, name), join(file, name)) })),
  );
}

async function readText(path: string, file: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    throw unreadable(file, err);
  }
}

function unreadable(file: string, err: unknown): UsageError {
  const code = (err as NodeJS.ErrnoException).code;
  return new UsageError(`cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
}

/** All of stdin, as one UTF-8 text: a character split across two chunks is decoded whole. */
async function readStdin(io: CliIO): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of io.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8');
}
