// PEP 508 environment markers (`python_full_version >= '3.12' and sys_platform == 'linux'`),
// evaluated for the machine a site environment is built for. uv.lock guards platform-specific
// dependencies with them (torch's CUDA libraries: `platform_machine == 'x86_64' and sys_platform == 'linux'`).

/** The marker variables of one target machine (PEP 508 names). */
export interface MarkerEnvironment {
  python_version: string;
  python_full_version: string;
  sys_platform: string;
  platform_machine: string;
  platform_system: string;
  os_name: string;
  implementation_name: string;
  platform_python_implementation: string;
  [name: string]: string;
}

/** CPython `major.minor` on Linux x86_64: what OSC's clusters run (and what python/gpu is locked for). */
export function linuxX86_64(python: string): MarkerEnvironment {
  const [major, minor] = python.split('.');
  return {
    python_version: `${major}.${minor}`,
    python_full_version: `${major}.${minor}.0`,
    sys_platform: 'linux',
    platform_machine: 'x86_64',
    platform_system: 'Linux',
    os_name: 'posix',
    implementation_name: 'cpython',
    platform_python_implementation: 'CPython',
  };
}

const VERSION_VARIABLES = new Set(['python_version', 'python_full_version', 'implementation_version']);
const TOKEN =
  /\s*(\(|\)|===|==|!=|<=|>=|~=|<|>|not\s+in\b|in\b|and\b|or\b|'[^']*'|"[^"]*"|[A-Za-z_][A-Za-z0-9_.]*)/y;

export class MarkerError extends Error {}

function release(v: string): number[] {
  const m = /^\s*v?(\d+(?:\.\d+)*)/.exec(v);
  if (!m) throw new MarkerError(`"${v}" is not a version`);
  return m[1]!.split('.').map(Number);
}

function compareReleases(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  return 0;
}

function compareVersions(left: string, op: string, right: string): boolean {
  if ((op === '==' || op === '!=') && right.endsWith('.*')) {
    const prefix = release(right.slice(0, -2));
    const equal = compareReleases(release(left).slice(0, prefix.length), prefix) === 0;
    return op === '==' ? equal : !equal;
  }
  const c = compareReleases(release(left), release(right));
  switch (op) {
    case '==':
    case '===':
      return c === 0;
    case '!=':
      return c !== 0;
    case '<':
      return c < 0;
    case '<=':
      return c <= 0;
    case '>':
      return c > 0;
    case '>=':
      return c >= 0;
    case '~=': {
      const r = release(right);
      return c >= 0 && compareReleases(release(left).slice(0, r.length - 1), r.slice(0, -1)) === 0;
    }
  }
  throw new MarkerError(`unknown operator ${op}`);
}

/** Whether `marker` holds on `env`; an empty marker always holds. Unknown variables are refused. */
export function evaluateMarker(marker: string, env: MarkerEnvironment): boolean {
  const tokens: string[] = [];
  let at = 0;
  while (at < marker.length) {
    if (/^\s*$/.test(marker.slice(at))) break;
    TOKEN.lastIndex = at;
    const m = TOKEN.exec(marker);
    if (!m) throw new MarkerError(`marker "${marker}": cannot read "${marker.slice(at)}"`);
    tokens.push(m[1]!.replace(/\s+/g, ' '));
    at = TOKEN.lastIndex;
  }
  if (tokens.length === 0) return true;
  let i = 0;
  const next = () => tokens[i++];
  const operand = (t: string | undefined): { text: string; variable?: string } => {
    if (t === undefined) throw new MarkerError(`marker "${marker}": ends too early`);
    if (/^['"]/.test(t)) return { text: t.slice(1, -1) };
    if (t === 'extra') return { text: '', variable: t }; // extras are resolved by uv.lock itself
    if (!(t in env)) throw new MarkerError(`marker "${marker}": unknown variable ${t}`);
    return { text: env[t]!, variable: t };
  };
  const comparison = (): boolean => {
    if (tokens[i] === '(') {
      i++;
      const v = or();
      if (next() !== ')') throw new MarkerError(`marker "${marker}": missing ")"`);
      return v;
    }
    const left = operand(next());
    const op = next();
    const right = operand(next());
    if (op === 'in') return right.text.includes(left.text);
    if (op === 'not in') return !right.text.includes(left.text);
    if (op === undefined || !['==', '!=', '<', '<=', '>', '>=', '~=', '==='].includes(op))
      throw new MarkerError(`marker "${marker}": expected a comparison, found ${op ?? 'the end'}`);
    const versions = [left.variable, right.variable].some((v) => v !== undefined && VERSION_VARIABLES.has(v));
    if (versions && op !== '===') return compareVersions(left.text, op, right.text);
    if (op === '==' || op === '===') return left.text === right.text;
    if (op === '!=') return left.text !== right.text;
    throw new MarkerError(
      `marker "${marker}": ${op} compares versions, not ${left.variable ?? right.variable ?? 'strings'}`,
    );
  };
  const and = (): boolean => {
    let v = comparison();
    while (tokens[i] === 'and') {
      i++;
      v = comparison() && v;
    }
    return v;
  };
  const or = (): boolean => {
    let v = and();
    while (tokens[i] === 'or') {
      i++;
      v = and() || v;
    }
    return v;
  };
  const value = or();
  if (i !== tokens.length) throw new MarkerError(`marker "${marker}": unexpected "${tokens[i]}"`);
  return value;
}
