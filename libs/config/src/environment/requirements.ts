// A fully pinned requirements file (what `pip-compile` or `uv export --format requirements-txt`
// write) as a pipeline's lock: every requirement `name==version`, markers evaluated for the site's
// platform, hashes and comments ignored. Anything that is not a pin is refused with its line, so an
// environment built from it is as reproducible as one built from a uv.lock.
import { evaluateMarker, type MarkerEnvironment } from './markers.ts';
import { LockfileError, normaliseName, type Pin } from './uv-lock.ts';

const PIN = /^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9_,.-]+\])?\s*==\s*([A-Za-z0-9][A-Za-z0-9.+!_-]*)$/;

/** The pins of a requirements text that apply on `env`, by normalised name. */
export function requirementsPins(text: string, env: MarkerEnvironment, file: string): Pin[] {
  const pins = new Map<string, Pin>();
  // Backslash continuations (`--hash` lines) join their requirement.
  const lines = text.replace(/\\\r?\n/g, ' ').split(/\r?\n/);
  lines.forEach((raw, i) => {
    const line = raw.replace(/(^|\s)#.*$/, '').replace(/\s--hash=\S+/g, '').trim();
    if (line === '') return;
    const where = `${file}:${i + 1}`;
    if (line.startsWith('-'))
      throw new LockfileError(`${where}: ${line}: options are not read; list every package as name==version`);
    const [requirement, marker] = line.split(';', 2).map((s) => s.trim()) as [string, string | undefined];
    const m = PIN.exec(requirement);
    if (!m)
      throw new LockfileError(
        `${where}: ${requirement} is not pinned: expected name==version (a lock pins every package)`,
      );
    if (marker !== undefined && marker !== '' && !evaluateMarker(marker, env)) return;
    const name = normaliseName(m[1]!);
    const seen = pins.get(name);
    if (seen && seen.version !== m[3])
      throw new LockfileError(`${where}: ${name} is pinned twice (${seen.version} and ${m[3]})`);
    pins.set(name, { name, version: m[3]! });
  });
  return [...pins.values()];
}
