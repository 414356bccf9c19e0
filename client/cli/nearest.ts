// The word a person most likely meant, for `did you mean …?` in usage errors (pure).

/** `did you mean X? ` for the nearest of `words`, or nothing when none is near. */
export function didYouMean(word: string, words: readonly string[]): string {
  const near = nearest(word, words);
  return near ? `did you mean ${near}? ` : '';
}

/**
 * The word of `words` nearest to `typed` by edit distance (insertions, deletions, substitutions, and swaps of two
 * neighbours), if it is within a third of the word's length (at least 1, at most 3); a unique prefix counts too.
 */
export function nearest(typed: string, words: readonly string[]): string | undefined {
  const prefixed = words.filter((w) => typed.length >= 3 && w.startsWith(typed));
  if (prefixed.length === 1) return prefixed[0];
  let best: { word: string; distance: number } | undefined;
  for (const word of words) {
    const distance = editDistance(typed, word);
    if (!best || distance < best.distance) best = { word, distance };
  }
  const limit = Math.min(3, Math.max(1, Math.floor(typed.replace(/^-+/, '').length / 3)));
  return best && best.distance <= limit ? best.word : undefined;
}

function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
      }
    }
  }
  return d[a.length]![b.length]!;
}
