// The part of TOML that python/uv.lock and python/pyproject.toml use: comments, [table] and
// [[array-of-tables]] headers (dotted), `key = value` with basic and literal strings, integers,
// floats, booleans, arrays (over several lines) and inline tables. Anything else (multi-line
// strings, dates) is refused with its line, never guessed.

export type TomlValue = string | number | boolean | TomlValue[] | TomlTable;
export interface TomlTable {
  [key: string]: TomlValue;
}

export class TomlError extends Error {
  constructor(file: string, line: number, message: string) {
    super(`${file}:${line}: ${message}`);
    this.name = 'TomlError';
  }
}

const BARE_KEY = /[A-Za-z0-9_-]/;

class Reader {
  pos = 0;
  readonly text: string;
  readonly file: string;
  constructor(text: string, file: string) {
    this.text = text;
    this.file = file;
  }

  line(): number {
    let n = 1;
    for (let i = 0; i < this.pos && i < this.text.length; i++) if (this.text[i] === '\n') n++;
    return n;
  }
  fail(message: string): never {
    throw new TomlError(this.file, this.line(), message);
  }
  peek(): string | undefined {
    return this.text[this.pos];
  }
  /** Spaces and tabs (and, where `newlines`, line breaks and comments). */
  skip(newlines: boolean): void {
    for (;;) {
      const c = this.peek();
      if (c === ' ' || c === '\t' || (newlines && (c === '\n' || c === '\r'))) this.pos++;
      else if (c === '#') while (this.pos < this.text.length && this.peek() !== '\n') this.pos++;
      else return;
    }
  }
  expect(c: string): void {
    if (this.peek() !== c)
      this.fail(`expected "${c}", found ${JSON.stringify(this.peek() ?? 'end of file')}`);
    this.pos++;
  }
  endOfLine(): void {
    this.skip(false);
    const c = this.peek();
    if (c === undefined) return;
    if (c === '\r') this.pos++;
    if (this.peek() !== '\n') this.fail(`expected the end of the line, found ${JSON.stringify(this.peek())}`);
    this.pos++;
  }

  key(): string {
    const c = this.peek();
    if (c === '"' || c === "'") return this.string();
    const start = this.pos;
    while (this.pos < this.text.length && BARE_KEY.test(this.text[this.pos]!)) this.pos++;
    if (this.pos === start) this.fail(`expected a key, found ${JSON.stringify(c ?? 'end of file')}`);
    return this.text.slice(start, this.pos);
  }
  dottedKey(): string[] {
    const parts = [this.key()];
    for (;;) {
      this.skip(false);
      if (this.peek() !== '.') return parts;
      this.pos++;
      this.skip(false);
      parts.push(this.key());
    }
  }

  string(): string {
    const quote = this.peek()!;
    if (this.text.startsWith(quote.repeat(3), this.pos)) this.fail('multi-line strings are not supported');
    this.pos++;
    let out = '';
    for (;;) {
      const c = this.text[this.pos++];
      if (c === undefined || c === '\n') this.fail('unterminated string');
      if (c === quote) return out;
      if (c === '\\' && quote === '"') {
        const e = this.text[this.pos++];
        const simple: Record<string, string> = {
          '"': '"',
          '\\': '\\',
          n: '\n',
          t: '\t',
          r: '\r',
          b: '\b',
          f: '\f',
        };
        if (e !== undefined && e in simple) out += simple[e];
        else if (e === 'u' || e === 'U') {
          const n = e === 'u' ? 4 : 8;
          const hex = this.text.slice(this.pos, this.pos + n);
          if (!/^[0-9A-Fa-f]+$/.test(hex) || hex.length !== n) this.fail(`bad escape \\${e}${hex}`);
          out += String.fromCodePoint(parseInt(hex, 16));
          this.pos += n;
        } else this.fail(`bad escape \\${e ?? ''}`);
      } else out += c;
    }
  }

  value(): TomlValue {
    const c = this.peek();
    if (c === '"' || c === "'") return this.string();
    if (c === '[') return this.array();
    if (c === '{') return this.inlineTable();
    const m = /^(true|false|[+-]?\d[\d_]*(\.\d[\d_]*)?([eE][+-]?\d+)?)(?=[\s,\]}#]|$)/.exec(
      this.text.slice(this.pos),
    );
    if (!m)
      this.fail(`unsupported value starting ${JSON.stringify(this.text.slice(this.pos, this.pos + 20))}`);
    this.pos += m[0].length;
    if (m[0] === 'true' || m[0] === 'false') return m[0] === 'true';
    return Number(m[0].replace(/_/g, ''));
  }
  array(): TomlValue[] {
    this.expect('[');
    const out: TomlValue[] = [];
    for (;;) {
      this.skip(true);
      if (this.peek() === ']') break;
      out.push(this.value());
      this.skip(true);
      if (this.peek() === ',') this.pos++;
      else if (this.peek() !== ']')
        this.fail(`expected "," or "]" in an array, found ${JSON.stringify(this.peek())}`);
    }
    this.pos++;
    return out;
  }
  inlineTable(): TomlTable {
    this.expect('{');
    const out: TomlTable = {};
    this.skip(false);
    if (this.peek() === '}') {
      this.pos++;
      return out;
    }
    for (;;) {
      this.skip(false);
      const key = this.dottedKey();
      this.skip(false);
      this.expect('=');
      this.skip(false);
      assign(out, key, this.value(), this);
      this.skip(false);
      if (this.peek() === ',') this.pos++;
      else if (this.peek() === '}') {
        this.pos++;
        return out;
      } else this.fail(`expected "," or "}" in an inline table, found ${JSON.stringify(this.peek())}`);
    }
  }
}

function isTable(v: TomlValue | undefined): v is TomlTable {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The table at `path` under `root`, created where missing; into the last element of an array of tables. */
function tableAt(root: TomlTable, path: string[], r: Reader): TomlTable {
  let t = root;
  for (const part of path) {
    let next = t[part];
    if (next === undefined) next = t[part] = {};
    if (Array.isArray(next)) next = next[next.length - 1];
    if (!isTable(next)) r.fail(`"${path.join('.')}" is not a table`);
    t = next;
  }
  return t;
}

function assign(table: TomlTable, key: string[], value: TomlValue, r: Reader): void {
  const target = tableAt(table, key.slice(0, -1), r);
  const last = key[key.length - 1]!;
  if (last in target) r.fail(`key "${key.join('.')}" is defined twice`);
  target[last] = value;
}

/** Parses the TOML subset above; `file` names the source in errors (`python/uv.lock:12: …`). */
export function parseToml(text: string, file = 'TOML'): TomlTable {
  const r: Reader = new Reader(text, file);
  const root: TomlTable = {};
  let current = root;
  for (;;) {
    r.skip(true);
    if (r.peek() === undefined) return root;
    if (r.peek() === '[') {
      r.pos++;
      const many = r.peek() === '[';
      if (many) r.pos++;
      r.skip(false);
      const path = r.dottedKey();
      r.skip(false);
      r.expect(']');
      if (many) r.expect(']');
      if (many) {
        const parent = tableAt(root, path.slice(0, -1), r);
        const last = path[path.length - 1]!;
        const list = (parent[last] ??= []);
        if (!Array.isArray(list)) r.fail(`"${path.join('.')}" is not an array of tables`);
        const t: TomlTable = {};
        list.push(t);
        current = t;
      } else current = tableAt(root, path, r);
      r.endOfLine();
      continue;
    }
    const key = r.dottedKey();
    r.skip(false);
    r.expect('=');
    r.skip(false);
    assign(current, key, r.value(), r);
    r.endOfLine();
  }
}
