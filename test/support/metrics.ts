// A worker's metrics as a test reads them: the Prometheus exposition format, scraped and looked up.

/** One sample of the exposition format: name, labels, value. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export async function scrapeMetrics(url: string): Promise<Sample[]> {
  const text = await (await fetch(url)).text();
  return text
    .split('\n')
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => {
      const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)!;
      const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
      return { name: match[1]!, labels, value: Number(match[3]) };
    });
}

/** The value of the one sample with `name` whose labels include `labels`, or undefined. */
export function sample(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} series`);
  return found[0]?.value;
}
