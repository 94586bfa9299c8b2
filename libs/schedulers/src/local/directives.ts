// Reads the `#SBATCH` header of a rendered script, so the local scheduler honours the same
// script SLURM would run (log paths, cpus, time limit) without a second source of truth.

const SHORT: Record<string, string> = {
  '-o': 'output',
  '-e': 'error',
  '-c': 'cpus-per-task',
  '-t': 'time',
  '-J': 'job-name',
  '-a': 'array',
  '-D': 'chdir',
};

export function parseSbatchDirectives(script: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of script.split('\n')) {
    const t = line.trim();
    if (t.startsWith('#!') || t === '') continue;
    if (!t.startsWith('#')) break; // sbatch stops reading directives at the first command
    const m = /^#SBATCH\s+(.*)$/.exec(t);
    if (!m) continue;
    const body = m[1]!.replace(/\s+#.*$/, '').trim();
    let key: string | undefined;
    let value = '';
    const long = /^--([A-Za-z-]+)(?:[= ](.*))?$/.exec(body);
    const short = /^(-[A-Za-z])\s*(.*)$/.exec(body);
    if (long) {
      key = long[1];
      value = long[2] ?? '';
    } else if (short) {
      key = SHORT[short[1]!];
      value = short[2] ?? '';
    }
    if (key) out.set(key, unquote(value.trim()));
  }
  return out;
}

function unquote(v: string): string {
  if (v.length >= 2 && ((v.startsWith("'") && v.endsWith("'")) || (v.startsWith('"') && v.endsWith('"')))) {
    return v.slice(1, -1);
  }
  return v;
}

/** Expands SLURM filename patterns: %j %A %a %x %u %N %%. */
export function expandLogPattern(
  pattern: string,
  ids: { jobId: string; arrayJobId?: string; arrayIndex?: number; name: string; user: string; node: string },
): string {
  return pattern.replace(/%(%|[jAaxuN])/g, (_, c: string) => {
    switch (c) {
      case '%':
        return '%';
      case 'j':
        return ids.jobId;
      case 'A':
        return ids.arrayJobId ?? ids.jobId;
      case 'a':
        return ids.arrayIndex === undefined ? '4294967294' : String(ids.arrayIndex);
      case 'x':
        return ids.name;
      case 'u':
        return ids.user;
      default:
        return ids.node;
    }
  });
}

/** Default SLURM log names when the script sets none. */
export function defaultLogPattern(isArray: boolean): string {
  return isArray ? 'slurm-%A_%a.out' : 'slurm-%j.out';
}
