// `npm run build`'s second step, after tsc: the CLI's commands (dist/client/cli/run.js and everything it imports,
// packages included) as one CommonJS file, dist/client/cli/run.bundle.cjs, and its prelude (prepare.js: settings,
// document, the update sent without the SDK) as another, prepare.bundle.cjs, which client/cli/load-commands.ts
// loads with a V8 code cache. One file: Node 20 resolves and links each of the several hundred ES modules on its own, and
// only CommonJS code can be compiled with a cache. Whitespace and syntax are minified, names are kept (errors are
// told apart by name). Prints one JSON line.
import { build } from 'esbuild';
import { statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../../dist/', import.meta.url));
const outdir = `${dist}client/cli`;
const entries = { 'run.bundle': `${outdir}/run.js`, 'prepare.bundle': `${outdir}/prepare.js` };
/** What the prelude must not hold: it is there to send the update before these load. */
const NOT_IN_PRELUDE = /node_modules[\\/](@temporalio[\\/](proto|client|workflow)|@grpc|protobufjs)[\\/]/;
/**
 * What the prelude may hold but must not run when it loads: the document's parser and schema, which only commands
 * that read a document load (`import()`), so `ferry delete` sends its update without them.
 */
const NOT_AT_PRELUDE_LOAD = /node_modules[\\/](zod|yaml)[\\/]/;

// What the CLI's Temporal client never uses of the protobuf definitions that @temporalio/proto builds at load (about
// a third of them): the Core SDK's, which only a worker speaks, and the Cloud Operations API's (@temporalio/cloud's
// client). Building fewer types is a shorter start; a definition that is not where it was fails the build.
const UNUSED_PROTOS = [['coresdk'], ['temporal', 'api', 'cloud']];

/** @type {import('esbuild').Plugin} */
const pruneProtos = {
  name: 'prune-protos',
  setup(b) {
    b.onLoad({ filter: /[\\/]@temporalio[\\/]proto[\\/]protos[\\/]json-module\.js$/ }, async ({ path }) => {
      const source = await readFile(path, 'utf8');
      const start = source.indexOf('.addJSON(');
      const end = source.lastIndexOf('});');
      if (start < 0 || end < start) throw new Error(`${path}: no .addJSON({...}) to prune`);
      const root = JSON.parse(source.slice(start + '.addJSON('.length, end + 1));
      for (const path of UNUSED_PROTOS) {
        const parent = path.slice(0, -1).reduce((ns, name) => ns?.nested?.[name], { nested: root });
        if (!parent?.nested?.[path.at(-1)]) throw new Error(`no protobuf namespace ${path.join('.')} to prune`);
        delete parent.nested[path.at(-1)];
      }
      return {
        contents: `${source.slice(0, start)}.addJSON(${JSON.stringify(root)}${source.slice(end + 1)}`,
        loader: 'js',
      };
    });
  },
};

const result = await build({
  plugins: [pruneProtos],
  entryPoints: Object.entries(entries).map(([out, path]) => ({ in: path, out })),
  outdir,
  outExtension: { '.js': '.cjs' },
  metafile: true,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20', // package.json's engines
  minifyWhitespace: true,
  minifySyntax: true,
  keepNames: true,
  legalComments: 'none',
  charset: 'ascii',
  logLevel: 'warning',
  // ES modules ask `import.meta.url` where they are; in the bundle, the answer is the bundle's own place.
  define: { 'import.meta.url': '__ferryBundleUrl' },
  banner: { js: 'var __ferryBundleUrl = require("node:url").pathToFileURL(__filename).href;' },
});
if (result.errors.length > 0 || result.warnings.length > 0) process.exit(1);
for (const [output, { inputs, entryPoint }] of Object.entries(result.metafile.outputs)) {
  if (!output.endsWith('prepare.bundle.cjs')) continue;
  const heavy = Object.keys(inputs).find((input) => NOT_IN_PRELUDE.test(input));
  if (heavy) throw new Error(`${output}: the prelude imports ${heavy}`);
  const eager = staticallyReached(entryPoint).find((input) => NOT_AT_PRELUDE_LOAD.test(input));
  if (eager) throw new Error(`${output}: the prelude runs ${eager} when it loads (import it with import())`);
}

/** The bundle's inputs that `entry` reaches by static imports and requires alone: what runs when the bundle loads. */
function staticallyReached(entry) {
  const seen = new Set([entry]);
  for (const input of seen) {
    for (const { path, kind } of result.metafile.inputs[input]?.imports ?? []) {
      if ((kind === 'import-statement' || kind === 'require-call') && result.metafile.inputs[path]) seen.add(path);
    }
  }
  return [...seen];
}
for (const out of Object.keys(entries)) {
  const outfile = `${outdir}/${out}.cjs`;
  // esbuild escapes every other character (its default charset), and the loader reads the file as Latin-1.
  const nonAscii = (await readFile(outfile)).findIndex((byte) => byte > 0x7f);
  if (nonAscii >= 0) throw new Error(`${outfile}: a byte above ASCII at offset ${nonAscii}`);
  process.stdout.write(
    `${JSON.stringify({ msg: 'CLI bundle written', path: outfile, bytes: statSync(outfile).size })}\n`,
  );
}
