// A unified diff of two texts, line by line, as `diff -u` prints it (pure; for `ferry diff`).

type Op = { kind: ' ' | '-' | '+'; line: string };

/**
 * The unified diff of `before` and `after` under the headers `--- from` and `+++ to`, with `context` unchanged
 * lines around each change; empty when the texts are the same.
 */
export function unifiedDiff(before: string, after: string, from: string, to: string, context = 3): string {
  const ops = lineOps(lines(before), lines(after));
  const hunks = hunksOf(ops, context);
  if (hunks.length === 0) return '';
  return [`--- ${from}`, `+++ ${to}`, ...hunks.flatMap((h) => hunkText(ops, h))].join('\n') + '\n';
}

/** The lines of `text`; a final newline ends the last line rather than starting an empty one. */
function lines(text: string): string[] {
  if (text === '') return [];
  const all = text.split('\n');
  return all[all.length - 1] === '' ? all.slice(0, -1) : all;
}

/** Kept, removed and added lines, by a longest common subsequence (the texts here are a few hundred lines). */
function lineOps(a: string[], b: string[]): Op[] {
  // common[i][j]: the length of the longest common subsequence of a[i..] and b[j..].
  const common = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i]![j] = a[i] === b[j] ? common[i + 1]![j + 1]! + 1 : Math.max(common[i + 1]![j]!, common[i]![j + 1]!);
    }
  }
  const ops: Op[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      ops.push({ kind: ' ', line: a[i++]! });
      j++;
    } else if (j < b.length && (i === a.length || common[i]![j + 1]! >= common[i + 1]![j]!)) {
      ops.push({ kind: '+', line: b[j++]! });
    } else {
      ops.push({ kind: '-', line: a[i++]! });
    }
  }
  // As diff prints a change: what goes, then what comes.
  return regroup(ops);
}

/** Within each run of changes, the removed lines before the added ones. */
function regroup(ops: Op[]): Op[] {
  const out: Op[] = [];
  for (let k = 0; k < ops.length;) {
    if (ops[k]!.kind === ' ') {
      out.push(ops[k++]!);
      continue;
    }
    const run: Op[] = [];
    while (k < ops.length && ops[k]!.kind !== ' ') run.push(ops[k++]!);
    out.push(...run.filter((o) => o.kind === '-'), ...run.filter((o) => o.kind === '+'));
  }
  return out;
}

/** The ranges [start, end) of `ops` each hunk shows: changes closer than twice the context share one. */
function hunksOf(ops: Op[], context: number): [number, number][] {
  const hunks: [number, number][] = [];
  let k = 0;
  while (k < ops.length) {
    if (ops[k]!.kind === ' ') {
      k++;
      continue;
    }
    const start = Math.max(k - context, hunks.length > 0 ? hunks[hunks.length - 1]![1] : 0);
    let lastChange = k;
    for (let n = k + 1; n < ops.length && n - lastChange - 1 <= 2 * context; n++) {
      if (ops[n]!.kind !== ' ') lastChange = n;
    }
    const end = Math.min(ops.length, lastChange + 1 + context);
    hunks.push([start, end]);
    k = end;
  }
  return hunks;
}

/** `@@ -l,s +l,s @@` and the hunk's lines. */
function hunkText(ops: Op[], [start, end]: [number, number]): string[] {
  const before = ops.slice(0, start);
  const shown = ops.slice(start, end);
  const range = (skip: Op['kind']) => {
    const offset = before.filter((o) => o.kind !== skip).length;
    const count = shown.filter((o) => o.kind !== skip).length;
    // An empty range names the line before it, as diff does (0 for the start of the file).
    return `${count === 0 ? offset : offset + 1},${count}`;
  };
  return [`@@ -${range('+')} +${range('-')} @@`, ...shown.map((o) => `${o.kind}${o.line}`)];
}
