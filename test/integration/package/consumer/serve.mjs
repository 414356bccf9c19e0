// Another team's program: Ferry's client library from the installed package, in plain Node (no TypeScript, no
// loader). Serves the document given as argument, waits for Ready, deletes it, and prints what it saw.
import { connectFromEnv, deleteModel, serveModel } from '@ferry-dev/ferry';

const doc = JSON.parse(process.argv[2]);
const client = await connectFromEnv();
try {
  const served = await serveModel(client, doc, { wait: true, timeoutMs: 180_000 });
  const deleted = await deleteModel(client, served.ref, { wait: true, timeoutMs: 180_000 });
  console.log(
    JSON.stringify({
      ready: { phase: served.status?.phase, endpoint: served.status?.endpoint },
      deleted: { phase: deleted.status?.phase, objects: deleted.teardown?.deleted },
    }),
  );
} finally {
  await client.connection.close();
}
