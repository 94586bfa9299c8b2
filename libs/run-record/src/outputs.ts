// A stage's declared outputs found in its task dir: a path, or a pattern whose `*` stands for any
// characters within one name (Lightning's `hpc_ckpt_*.ckpt`, a CSVLogger's `version_*` folder per
// attempt). Matches come in natural order (numbers in names compare as numbers), so attempt 10
// follows attempt 9, and a history spread over attempts is read as one.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const NUMBERS = /(\d+)/;

/** Natural order of names: `version_2` before `version_10`. */
export function naturalCompare(a: string, b: string): number {
  const pa = a.split(NUMBERS);
  const pb = b.split(NUMBERS);
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    const x = pa[i]!;
    const y = pb[i]!;
    if (x === y) continue;
    const numeric = i % 2 === 1;
    if (numeric && Number(x) !== Number(y)) return Number(x) - Number(y);
    return x < y ? -1 : 1;
  }
  return pa.length - pb.length;
}

function segmentRegex(segment: string): RegExp {
  return new RegExp(`^${segment.replace(/[.+?^${}()|[\]\\-]/g, '\\$&').replace(/\*/g, '[^/]*')}$`);
}

/** The files under `dir` that `pattern` (relative, `*` within names) names, in natural order. */
export function expandOutput(dir: string, pattern: string): string[] {
  let found = [dir];
  for (const segment of pattern.split('/')) {
    if (!segment.includes('*')) {
      found = found.map((d) => join(d, segment)).filter((p) => existsSync(p));
      continue;
    }
    const re = segmentRegex(segment);
    found = found.flatMap((d) => {
      let names: string[] = [];
      try {
        if (statSync(d).isDirectory()) names = readdirSync(d);
      } catch {
        return [];
      }
      return names
        .filter((n) => re.test(n))
        .sort(naturalCompare)
        .map((n) => join(d, n));
    });
  }
  return found.filter((p) => {
    try {
      return statSync(p).isFile();
    } catch {
      return false;
    }
  });
}

/** Whether any of the patterns names a file under `dir`. */
export function anyOutput(dir: string, patterns: readonly string[]): boolean {
  return patterns.some((p) => expandOutput(dir, p).length > 0);
}

/**
 * Several CSV files (one per attempt) as one: the columns of all of them in the order first seen,
 * each file's rows in turn (a column a file lacks left empty). Fields are taken as written (no
 * quoted commas: what a metrics logger writes).
 */
export function mergeCsv(files: readonly string[]): string {
  const tables = files.map((f) => {
    const [header = '', ...rows] = readFileSync(f, 'utf8')
      .split(/\r?\n/)
      .filter((l) => l.trim() !== '');
    return { columns: header.split(','), rows: rows.map((r) => r.split(',')) };
  });
  const columns: string[] = [];
  for (const t of tables) for (const c of t.columns) if (!columns.includes(c)) columns.push(c);
  const lines = [columns.join(',')];
  for (const t of tables)
    for (const row of t.rows) {
      const at = new Map(t.columns.map((c, i) => [c, row[i] ?? '']));
      lines.push(columns.map((c) => at.get(c) ?? '').join(','));
    }
  return `${lines.join('\n')}\n`;
}
