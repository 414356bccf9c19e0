// Runs one of the benchmarks under bench/ (as `npm run bench:…` does, from the sources) and returns the JSON it prints;
// its stderr (the progress lines and tables) is kept for the failure message. A benchmark still running when `signal`
// aborts (the test timed out) is stopped with SIGTERM, so that it deletes its models and frees their GPUs.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from './local-env.js';

export async function bench(script: string, args: string[], signal?: AbortSignal): Promise<Record<string, unknown>> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'bench', script), ...args], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stop = () => {
    // The test timed out: its error will not carry the benchmark's output, so the end of it goes to the log here.
    process.stderr.write(
      `bench/${script} stopped by the test's timeout; the end of its stderr:\n${stderr.slice(-6000)}\n`,
    );
    child.kill('SIGTERM');
  };
  signal?.addEventListener('abort', stop, { once: true });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  signal?.removeEventListener('abort', stop);
  if (code !== 0) throw new Error(`bench/${script} exited ${code}:\n${stderr.slice(-6000)}`);
  return JSON.parse(stdout) as Record<string, unknown>;
}
