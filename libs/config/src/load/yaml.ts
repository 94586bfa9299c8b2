// The one YAML loader: parses with source positions so every error can say file:line:col.
import { LineCounter, isMap, isPair, isScalar, isSeq, parseDocument, type Document, type Node } from 'yaml';
import type { SpecIssue } from '../errors.ts';

export interface PositionedYaml {
  value: unknown;
  /** Position of the value at a field path, or of the nearest parent that exists. */
  positionOf(path: readonly (string | number)[]): { line: number; col: number } | undefined;
  /** Position of the key itself (for unknown keys). */
  keyPositionOf(path: readonly (string | number)[]): { line: number; col: number } | undefined;
  syntaxIssues: SpecIssue[];
}

export function parseYaml(text: string, file?: string): PositionedYaml {
  const lineCounter = new LineCounter();
  const doc: Document = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true, merge: true });
  const pos = (offset: number | undefined) => {
    if (offset === undefined) return undefined;
    const p = lineCounter.linePos(offset);
    return { line: p.line, col: p.col };
  };
  const syntaxIssues: SpecIssue[] = doc.errors.map((e) => {
    const p = pos(e.pos[0]);
    return { ...(file ? { file } : {}), ...(p ?? {}), path: '', message: `YAML: ${e.message.split('\n')[0]}` };
  });
  const walk = (path: readonly (string | number)[], wantKey: boolean) => {
    let node: unknown = doc.contents;
    let best: Node | undefined = isNodeLike(node) ? (node as Node) : undefined;
    let keyNode: unknown;
    for (const part of path) {
      keyNode = undefined;
      if (isMap(node)) {
        const pair = node.items.find((it) => isPair(it) && isScalar(it.key) && String(it.key.value) === String(part));
        if (!pair) break;
        keyNode = pair.key;
        node = pair.value;
      } else if (isSeq(node) && typeof part === 'number') {
        node = node.items[part];
      } else break;
      if (isNodeLike(node)) best = node as Node;
      else break;
    }
    const target = wantKey && isNodeLike(keyNode) ? (keyNode as Node) : best;
    return pos(target?.range?.[0]);
  };
  return {
    value: doc.errors.length ? undefined : doc.toJS({ maxAliasCount: 100 }),
    positionOf: (path) => walk(path, false),
    keyPositionOf: (path) => walk(path, true),
    syntaxIssues,
  };
}

function isNodeLike(v: unknown): boolean {
  return typeof v === 'object' && v !== null && 'range' in v;
}
