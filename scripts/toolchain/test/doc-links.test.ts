// Every relative link of the repository's READMEs and docs resolves: the file (or folder) exists,
// and an anchor (`file.md#heading`, `#heading`) names a heading of that file, by GitHub's slug rules
// (the heading's text lower-cased, punctuation dropped, spaces to `-`, `-1`, `-2` … for repeats).
// Links with a scheme (https:, mailto:) are not followed; anchors into files other than Markdown
// (a source file's `#L10`) are not checked.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';

const repo = resolve(import.meta.dirname, '../../..');

/** `text` without fenced code blocks (their lines blanked, so line numbers stay). */
function withoutFences(text: string): string[] {
  let fence: string | undefined;
  return text.split('\n').map((line) => {
    const open = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (fence === undefined && open) {
      fence = open[1]![0]!.repeat(open[1]!.length);
      return '';
    }
    if (fence !== undefined) {
      if (line.trim().startsWith(fence)) fence = undefined;
      return '';
    }
    return line;
  });
}

/** A line without its code spans (`` `a [b](c)` `` is no link). */
const withoutCodeSpans = (line: string) => line.replace(/(`+)(?:(?!\1).)*?\1/g, (m) => ' '.repeat(m.length));

/** GitHub's anchor of a heading's text (github-slugger): lower case, every character but letters,
 *  digits, `_`, `-` and spaces dropped, each space a `-`. Markdown in the heading counts by its text. */
export function slug(heading: string): string {
  // code spans are literal text (`<runs dir>` is no html tag); outside them, a link counts by its
  // text and html tags and emphasis marks by nothing
  const text = heading
    .split(/(`+[^`]*`+)/)
    .map((part, i) =>
      i % 2 === 1
        ? part.replace(/`/g, '')
        : part
            .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
            .replace(/<[^>]+>/g, '')
            .replace(/[*]/g, ''),
    )
    .join('')
    .trim();
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a Markdown file has: its headings' slugs (repeats numbered as GitHub does) and the
 *  `id`/`name` of its html anchors. */
export function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of withoutFences(text)) {
    const h = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      const base = slug(h[1]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      out.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const a of line.matchAll(/<a\s[^>]*(?:id|name)="([^"]+)"/g)) out.add(a[1]!);
  }
  return out;
}

/** Every link target of a Markdown text with its line: inline links and images, reference
 *  definitions and html `href`s, outside code. */
export function linksOf(text: string): { line: number; target: string }[] {
  const out: { line: number; target: string }[] = [];
  withoutFences(text).forEach((raw, i) => {
    const line = withoutCodeSpans(raw);
    const found = [
      ...[...line.matchAll(/\]\(\s*<([^>]*)>[^)]*\)/g)].map((m) => m[1]!),
      ...[...line.matchAll(/\]\(\s*([^)<\s]+)(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!),
      ...[...line.matchAll(/^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?/g)].map((m) => m[1]!),
      ...[...line.matchAll(/\shref="([^"]+)"/g)].map((m) => m[1]!),
    ];
    for (const target of found) out.push({ line: i + 1, target });
  });
  return out;
}

/** What is wrong with the relative links of `file` (a path under `root`), one line each. */
export function brokenLinks(root: string, file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  const problems: string[] = [];
  for (const { line, target } of linksOf(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue; // https:, mailto:
    const hash = target.indexOf('#');
    const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
    const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
    const where = `${file}:${line}: ${target}`;
    const abs = pathPart === '' ? join(root, file) : resolve(root, dirname(file), pathPart);
    const rel = relative(root, abs);
    if (rel.startsWith('..')) {
      problems.push(`${where}: points outside the repository (${rel})`);
      continue;
    }
    if (!existsSync(abs)) {
      problems.push(`${where}: no file or folder ${rel}`);
      continue;
    }
    if (anchor === undefined || anchor === '' || !abs.endsWith('.md') || statSync(abs).isDirectory())
      continue;
    const anchors = anchorsOf(readFileSync(abs, 'utf8'));
    if (!anchors.has(anchor)) {
      const words = new Set(anchor.split('-').filter((w) => w.length > 3));
      const shared = (a: string) => a.split('-').filter((w) => words.has(w)).length;
      const near = [...anchors]
        .filter((a) => shared(a) > 0)
        .sort((a, b) => shared(b) - shared(a))
        .slice(0, 3);
      problems.push(
        `${where}: ${rel} has no heading #${anchor}${near.length ? ` (it has e.g. #${near.join(', #')})` : ''}`,
      );
    }
  }
  return problems;
}

/** The documents checked: every README.md of the repository and the Markdown under a docs/ folder. */
function documents(): string[] {
  const r = spawnSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], {
    cwd: repo,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, `git ls-files failed: ${r.stderr}`);
  return r.stdout
    .split('\0')
    .filter((f) => /(^|\/)README\.md$/.test(f) || /(^|\/)docs\/.*\.md$/.test(f))
    .filter((f) => existsSync(join(repo, f)))
    .sort();
}

test('GitHub anchors of headings: lower case, punctuation dropped, spaces to -, repeats numbered', () => {
  assert.equal(slug('A site over SSH'), 'a-site-over-ssh');
  assert.equal(
    slug("Cost before queueing, sizes from history (`@kdgat/planning`'s `cost.ts`)"),
    'cost-before-queueing-sizes-from-history-kdgatplannings-costts',
  );
  assert.equal(slug('apps/runner — `kdgat-runner`'), 'appsrunner--kdgat-runner');
  assert.equal(
    slug('Which message is the extra one (2026-11-28, third session)'),
    'which-message-is-the-extra-one-2026-11-28-third-session',
  );
  assert.equal(slug('The [runner](apps/runner/README.md) and data_sets'), 'the-runner-and-data_sets');
  assert.equal(
    slug('The catalogue of all runs (`<runs dir>/catalogue/`)'),
    'the-catalogue-of-all-runs-runs-dircatalogue',
  );
  assert.equal(slug('A <em>real</em> **box**'), 'a-real-box');
  assert.deepEqual(
    [...anchorsOf('# Tests\n\n## Tests\n```\n# not a heading\n```\n### Tests\n<a id="here"></a>\n')],
    ['tests', 'tests-1', 'tests-2', 'here'],
  );
});

test('a missing file, a missing heading and a link out of the repository are found; code is not read', () => {
  const root = mkdtempSync(join(tmpdir(), 'kdgat-links-'));
  try {
    mkdirSync(join(root, 'docs'));
    writeFileSync(join(root, 'docs', 'b.md'), '# B\n\n## A site over SSH\n');
    writeFileSync(
      join(root, 'README.md'),
      [
        '# Top',
        'ok: [b](docs/b.md#a-site-over-ssh), [folder](docs/), [self](#top), [web](https://example.org/x#y)',
        'bad: [gone](docs/nope.md) and [heading](docs/b.md#what-tests-prove)',
        'out: [up](../elsewhere.md)',
        'code: `[not](a-link.md)`',
        '```',
        '[not](either.md)',
        '```',
        '[ref]: docs/b.md#b',
        '[ref2]: docs/b.md#missing',
      ].join('\n'),
    );
    assert.deepEqual(brokenLinks(root, 'README.md'), [
      'README.md:3: docs/nope.md: no file or folder docs/nope.md',
      'README.md:3: docs/b.md#what-tests-prove: docs/b.md has no heading #what-tests-prove',
      'README.md:4: ../elsewhere.md: points outside the repository (../elsewhere.md)',
      'README.md:10: docs/b.md#missing: docs/b.md has no heading #missing',
    ]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("every relative link of the repository's READMEs and docs resolves to a file and a heading", () => {
  const docs = documents();
  assert.ok(
    docs.includes('README.md') && docs.includes('docs/ARCHITECTURE.md'),
    `checked: ${docs.join(', ')}`,
  );
  const problems = docs.flatMap((f) => brokenLinks(repo, f));
  assert.deepEqual(problems, [], `broken links in ${docs.length} documents:\n${problems.join('\n')}`);
});
