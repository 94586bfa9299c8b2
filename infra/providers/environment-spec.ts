// The canonical environment.yml as carried in resource inputs, and the package lists read from it.
import { parse } from 'yaml';

// The CLI renders any string that parses as YAML as a structure and pairs list items by index
// (`~ [1]: "numpy=2.3" => "cugraph=26.10"`). A leading YAML directive line with no document
// start after it makes the text unparseable, so the CLI falls back to a line diff:
// `-   - pytorch=2.7` / `+   - pytorch=2.8`. The provider strips the line before use.
const DISPLAY_HEADER = '%kdgat-hpc environment.yml (canonical; previews diff it line by line)';

export function ymlForDisplay(yml: string): string {
  return `${DISPLAY_HEADER}\n${yml}`;
}

export function ymlFromDisplay(text: string): string {
  return text.startsWith('%') ? text.slice(text.indexOf('\n') + 1) : text;
}

export interface SpecPackages {
  channels: string[];
  /** Top-level conda match specs (`pytorch=2.8`). */
  conda: string[];
  /** Entries of `- pip:` lists. */
  pip: string[];
}

export function specPackages(yml: string): SpecPackages {
  const doc = (parse(yml) ?? {}) as { channels?: unknown; dependencies?: unknown };
  const deps = Array.isArray(doc.dependencies) ? doc.dependencies : [];
  const conda = deps.filter((d): d is string => typeof d === 'string');
  const pip = deps.flatMap((d) =>
    typeof d === 'object' && d !== null && Array.isArray((d as { pip?: unknown }).pip)
      ? ((d as { pip: unknown[] }).pip.filter((p) => typeof p === 'string') as string[])
      : [],
  );
  const channels = Array.isArray(doc.channels)
    ? doc.channels.filter((c): c is string => typeof c === 'string')
    : [];
  return { channels, conda, pip };
}

/** Package list as text, one `name=version` per sorted line: the CLI diffs it line by line. */
export function packageText(entries: { name: string; version: string }[]): string {
  return entries
    .map((e) => `${e.name.toLowerCase()}=${e.version}`)
    .sort()
    .join('\n')
    .concat('\n');
}
