// No import circle between the files of the house's TypeScript (every libs/*/src, the runner app,
// infra's program) other than type-only ones: the module-boundary lint rule keeps the arrows between
// projects (workspace.test.ts), this keeps them within a project. An import is type-only when it is
// `import type`/`export type`, or every name it brings is `type X`; those are erased at run time.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

const repo = resolve(import.meta.dirname, '../../..');
const ROOTS = [
  ...readdirSync(join(repo, 'libs')).map((lib) => `libs/${lib}/src`),
  'apps/runner/src',
  'infra/components',
  'infra/providers',
];
const TEST_FILE = /\.(test|test-support)\.ts$|\/test-support\//;

function* sources(dir: string): Generator<string> {
  let entries;
  try {
    entries = readdirSync(join(repo, dir), { withFileTypes: true });
  } catch {
    return;
  }
  for (const entry of entries) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) yield* sources(path);
    else if (path.endsWith('.ts') && !TEST_FILE.test(path)) yield path;
  }
}

/** The files `text` (at `file`) imports or re-exports at run time: relative specifiers only. */
export function valueImports(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false);
  const out: string[] = [];
  for (const node of source.statements) {
    let specifier: ts.Expression | undefined;
    if (ts.isImportDeclaration(node)) {
      const clause = node.importClause;
      const named = clause?.namedBindings;
      const typeOnly =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            named !== undefined &&
            ts.isNamedImports(named) &&
            named.elements.length > 0 &&
            named.elements.every((e) => e.isTypeOnly)));
      if (!typeOnly) specifier = node.moduleSpecifier;
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier) {
      const clause = node.exportClause;
      const typeOnly =
        node.isTypeOnly ||
        (clause !== undefined &&
          ts.isNamedExports(clause) &&
          clause.elements.length > 0 &&
          clause.elements.every((e) => e.isTypeOnly));
      if (!typeOnly) specifier = node.moduleSpecifier;
    }
    if (specifier && ts.isStringLiteral(specifier) && specifier.text.startsWith('.'))
      out.push(relative(repo, resolve(repo, dirname(file), specifier.text)));
  }
  return out;
}

/** The circles of a graph (its strongly connected parts of more than one file, or a file importing itself). */
export function circles(edges: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!edges.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const part: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        part.push(w);
      } while (w !== v);
      if (part.length > 1 || (edges.get(v) ?? []).includes(v)) found.push(part.sort());
    }
  };
  for (const v of edges.keys()) if (!index.has(v)) visit(v);
  return found;
}

test('a circle of value imports is found; type-only imports are not counted', () => {
  const a = valueImports('libs/x/src/a.ts', "import { b } from './b.ts';\nexport const a = b;\n");
  const b = valueImports('libs/x/src/b.ts', "import type { A } from './a.ts';\nexport const b = 1;\n");
  const typeNames = valueImports('libs/x/src/c.ts', "import { type A, type B } from './a.ts';\n");
  const reexport = valueImports(
    'libs/x/src/d.ts',
    "export { a } from './a.ts';\nexport type { T } from './t.ts';\n",
  );
  assert.deepEqual(a, ['libs/x/src/b.ts']);
  assert.deepEqual(b, []);
  assert.deepEqual(typeNames, []);
  assert.deepEqual(reexport, ['libs/x/src/a.ts']);
  const withType = new Map([
    ['a', ['b']],
    ['b', []],
  ]);
  assert.deepEqual(circles(withType), []);
  const circle = new Map([
    ['a', ['b']],
    ['b', ['c']],
    ['c', ['a']],
    ['d', ['a']],
  ]);
  assert.deepEqual(circles(circle), [['a', 'b', 'c']]);
});

test("no circle of value imports between the house's files", () => {
  const edges = new Map<string, string[]>();
  for (const root of ROOTS)
    for (const file of sources(root))
      edges.set(file, valueImports(file, readFileSync(join(repo, file), 'utf8')));
  assert.ok(edges.size > 100, `read only ${edges.size} files`);
  assert.deepEqual(circles(edges), []);
});
