// CLI entry: `npx tsx deploy/engine-sim/main.ts --served-model-name qwen --port 0`. Prints one JSON line on stdout
// once listening so a supervisor can learn the port; everything else goes to stderr.
import { ArgsError, parseEngineArgs, type ParsedEngineArgs } from './args.js';
import { createEngineSim, DEFAULT_LOAD_DELAY_SECONDS } from './server.js';

const log = (message: string) => process.stderr.write(`engine-sim: ${message}\n`);

let parsed: ParsedEngineArgs;
try {
  parsed = parseEngineArgs(process.argv.slice(2), process.env);
} catch (err) {
  if (!(err instanceof ArgsError)) throw err;
  log(`error: ${err.message}`);
  // argparse's exit status for usage errors, which is what vLLM would return.
  process.exit(2);
}
for (const warning of parsed.warnings) log(`warning: ${warning}`);

const sim = createEngineSim(parsed.options);
let stopping = false;
const shutdown = (signal: NodeJS.Signals) => {
  if (stopping) return;
  stopping = true;
  log(`${signal} received, shutting down`);
  sim.stop().then(
    () => process.exit(0),
    (err: unknown) => {
      log(`error while stopping: ${String(err)}`);
      process.exit(1);
    },
  );
};
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

try {
  const { port, host } = await sim.start();
  process.stdout.write(`${JSON.stringify({ event: 'listening', port, host })}\n`);
  const loadDelay = parsed.options.loadDelaySeconds ?? DEFAULT_LOAD_DELAY_SECONDS;
  log(`simulating vLLM for ${sim.state.servedModelNames.join(', ')} on ${host}:${port}; "loading" for ${loadDelay}s`);
  setTimeout(() => log('simulated model loaded; /health now returns 200'), loadDelay * 1000).unref();
} catch (err) {
  log(`error: cannot listen: ${(err as Error).message}`);
  process.exit(1);
}
