/** One problem in a spec: where it is, which field, what was expected and what was found. */
export interface SpecIssue {
  file?: string;
  line?: number;
  col?: number;
  /** Dotted field path, e.g. `stages[0].resources.gpus.count`. */
  path: string;
  message: string;
  expected?: string;
  found?: string;
}

export function formatIssue(i: SpecIssue): string {
  const at = i.file ? `${i.file}${i.line ? `:${i.line}:${i.col ?? 1}` : ''}: ` : '';
  const ef = i.expected ? ` (expected ${i.expected}${i.found !== undefined ? `, found ${i.found}` : ''})` : '';
  return `${at}${i.path || '<root>'}: ${i.message}${ef}`;
}

/** The one error type of this layer: every problem of a spec at once, never a partial result. */
export class SpecValidationError extends Error {
  readonly issues: SpecIssue[];
  constructor(issues: SpecIssue[], what = 'spec') {
    super(
      `${what} is invalid (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n` +
        issues.map((i) => `  ${formatIssue(i)}`).join('\n'),
    );
    this.name = 'SpecValidationError';
    this.issues = issues;
  }
}

/** Levenshtein distance, for "did you mean" suggestions. */
export function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j]!;
      prev[j] = Math.min(up + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length]!;
}

/** The closest candidate within a third of the word's length (at least 2 edits), if any. */
export function nearest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestD) {
      best = c;
      bestD = d;
    }
  }
  return best;
}

export function didYouMean(word: string, candidates: readonly string[]): string {
  const n = nearest(word, candidates);
  return n ? ` — did you mean \`${n}\`?` : '';
}
