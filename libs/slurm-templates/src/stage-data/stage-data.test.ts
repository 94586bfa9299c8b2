import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  truncateSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runsHere } from '../test-support/skips.ts';
import { renderStageData } from './render-stage-data.ts';

// The staging script runs for real here: real bash, cp, find, df, and (as root) a real size-limited tmpfs.
let dir: string;
let script: string;
let scratch: string;
let local: string;

function makeDataset(name: string, files: Record<string, number>): string {
  const d = join(scratch, name);
  for (const [rel, size] of Object.entries(files)) {
    const path = join(d, rel);
    mkdirSync(join(path, '..'), { recursive: true });
    const buf = Buffer.alloc(size);
    for (let i = 0; i < size; i++) buf[i] = (i * 31 + rel.length) & 0xff;
    writeFileSync(path, buf);
  }
  return d;
}

function stage(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync('bash', [script, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TMPDIR: local, ...env },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kdgat-stage-'));
  script = join(dir, 'stage_data.sh');
  writeFileSync(script, renderStageData({ parallelCopies: 3, reserveMB: 1 }));
  scratch = join(dir, 'scratch');
  local = join(dir, 'local');
  mkdirSync(scratch);
  mkdirSync(local);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const cacheFiles = {
  'train.pt': 300_000,
  'val.pt': 120_000,
  'vocab.pkl': 4_000,
  'meta/stats.json': 200,
  'odd name $x.json': 10,
};

describe('stage_data.sh', () => {
  it('stages a cache: same bytes, renamed into place, prints size, seconds and MB/s, exports the root', () => {
    const src = makeDataset('hcrl_sa', cacheFiles);
    const r = stage(['hcrl_sa', src]);
    const root = join(local, 'hpc-cache');
    // stderr says only where the caches are ready (a multi-node job's log shows one line per node).
    expect(r.stderr).toBe(`kdgat-hpc stage: caches ready on ${hostname()} in ${root}\n`);
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n').at(-1)).toBe(root);
    expect(r.stdout).toMatch(
      /hcrl_sa: 0\.4 MB in 5 file\(s\); copied 5 \(0\.4 MB\) in [\d.]+ s, [\d.]+ MB\/s; 0 already staged/,
    );
    for (const rel of Object.keys(cacheFiles)) {
      expect(readFileSync(join(root, 'hcrl_sa', rel)).equals(readFileSync(join(src, rel)))).toBe(true);
    }
    expect(existsSync(join(root, 'hcrl_sa.partial'))).toBe(false);
  });

  it('exports HPC_CACHE_ROOT when sourced, for several datasets', () => {
    const a = makeDataset('hcrl_sa', { 'a.pt': 1000 });
    const b = makeDataset('set_01', { 'b.pt': 2000 });
    const out = execFileSync(
      'bash',
      [
        '-c',
        'set -euo pipefail; source "$1"; hpc_stage_data hcrl_sa "$2" set_01 "$3" >/dev/null; echo "$HPC_CACHE_ROOT"',
        'x',
        script,
        a,
        b,
      ],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TMPDIR: local },
      },
    );
    expect(out.trim()).toBe(join(local, 'hpc-cache'));
    expect(existsSync(join(local, 'hpc-cache', 'set_01', 'b.pt'))).toBe(true);
  });

  it('a second staging copies nothing and says everything was already staged and verified', () => {
    const src = makeDataset('hcrl_sa', cacheFiles);
    expect(stage(['hcrl_sa', src]).status).toBe(0);
    const again = stage(['hcrl_sa', src]);
    expect(again.status).toBe(0);
    expect(again.stdout).toMatch(
      /copied 0 \(0\.0 MB\) in [\d.]+ s, nothing to copy; 5 already staged and verified/,
    );
  });

  it('detects a corrupted staged file (size or mtime differs) and copies only that file again', () => {
    const src = makeDataset('hcrl_sa', cacheFiles);
    expect(stage(['hcrl_sa', src]).status).toBe(0);
    const staged = join(local, 'hpc-cache', 'hcrl_sa');
    truncateSync(join(staged, 'train.pt'), 1000); // cut short, as by a full disk
    writeFileSync(join(staged, 'vocab.pkl'), Buffer.alloc(4_000, 7)); // same size, rewritten: mtime moves
    utimesSync(join(staged, 'vocab.pkl'), new Date(), new Date(Date.now() + 5_000));
    const r = stage(['hcrl_sa', src]);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain(
      'hcrl_sa: 2 staged file(s) differ from the source in size or mtime (corrupt or stale): copying them again',
    );
    expect(r.stdout).toMatch(/copied 2 \([\d.]+ MB\) .*; 3 already staged and verified/);
    expect(readFileSync(join(staged, 'train.pt')).equals(readFileSync(join(src, 'train.pt')))).toBe(true);
    expect(readFileSync(join(staged, 'vocab.pkl')).equals(readFileSync(join(src, 'vocab.pkl')))).toBe(true);
  });

  it('resumes an interrupted copy from <dataset>.partial and removes files the source no longer has', () => {
    const src = makeDataset('hcrl_sa', cacheFiles);
    expect(stage(['hcrl_sa', src]).status).toBe(0);
    const root = join(local, 'hpc-cache');
    execFileSync('mv', [join(root, 'hcrl_sa'), join(root, 'hcrl_sa.partial')]);
    rmSync(join(root, 'hcrl_sa.partial', 'val.pt'));
    writeFileSync(join(root, 'hcrl_sa.partial', 'gone.pt'), 'old');
    const r = stage(['hcrl_sa', src]);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('removed 1 staged file(s) no longer in the source');
    expect(r.stdout).toMatch(/copied 1 .*; 4 already staged and verified/);
    expect(existsSync(join(root, 'hcrl_sa', 'gone.pt'))).toBe(false);
  });

  it('jobs sharing a local disk stage a dataset once: the others wait on the lock and find it verified', async () => {
    const src = makeDataset('hcrl_sa', { 'train.pt': 40_000_000, 'vocab.pkl': 100 });
    const run = () =>
      new Promise<string>((resolve, reject) => {
        const child = spawn('bash', [script, 'hcrl_sa', src], {
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TMPDIR: local, HPC_STAGE_JOBS: '1' },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        child.stdout.on('data', (d) => (out += d));
        child.stderr.on('data', (d) => (out += d));
        child.on('close', (code) =>
          code === 0 ? resolve(out) : reject(new Error(`status ${code}: ${out}`)),
        );
      });
    const outs = await Promise.all([run(), run(), run()]);
    expect(outs.filter((o) => /copied 2 \(40\.0 MB\)/.test(o))).toHaveLength(1);
    expect(outs.filter((o) => /copied 0 .* 2 already staged and verified/.test(o))).toHaveLength(2);
    expect(
      readFileSync(join(local, 'hpc-cache', 'hcrl_sa', 'train.pt')).equals(
        readFileSync(join(src, 'train.pt')),
      ),
    ).toBe(true);
  });

  it('fails with a clear message when the dataset directory is missing', () => {
    const r = stage(['hcrl_sa', join(scratch, 'hcrl_sa')]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      `kdgat-hpc stage: ERROR: dataset hcrl_sa: source directory '${join(scratch, 'hcrl_sa')}' does not exist`,
    );
  });

  it('fails with a clear message when the dataset directory holds no files', () => {
    mkdirSync(join(scratch, 'hcrl_sa', 'empty-subdir'), { recursive: true });
    const r = stage(['hcrl_sa', join(scratch, 'hcrl_sa')]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('holds no files');
  });

  it('rejects a dataset name that is not a directory name', () => {
    const r = stage(['../etc', scratch]);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('dataset ../etc: dataset names are letters, digits');
  });

  it('uses a per-job directory under /tmp when TMPDIR is unset', () => {
    const src = makeDataset('hcrl_sa', { 'a.pt': 100 });
    const r = spawnSync('bash', [script, 'hcrl_sa', src], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SLURM_JOB_ID: `test${process.pid}` },
    });
    const base = `/tmp/hpc-job-test${process.pid}-${process.getuid!()}`;
    const root = `${base}/hpc-cache`;
    try {
      expect(r.status).toBe(0);
      expect(r.stdout.trim().split('\n').at(-1)).toBe(root);
      expect(existsSync(join(root, 'hcrl_sa', 'a.pt'))).toBe(true);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it("never reads a staging root that is not the user's alone: another user's gives way to their own, a link is refused", () => {
    const src = makeDataset('hcrl_sa', { 'a.pt': 100 });
    const tmp = mkdtempSync(join(tmpdir(), 'kdgat-shared-tmp-'));
    try {
      // A node-local disk shared by users: a neighbour's hpc-cache is there first, with a planted file.
      mkdirSync(join(tmp, 'hpc-cache', 'hcrl_sa'), { recursive: true });
      writeFileSync(join(tmp, 'hpc-cache', 'hcrl_sa', 'a.pt'), 'x'.repeat(100));
      chownSync(join(tmp, 'hpc-cache'), 65534, 65534);
      const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', TMPDIR: tmp, SLURM_JOB_ID: `n${process.pid}` };
      const r = spawnSync('bash', [script, 'hcrl_sa', src], { encoding: 'utf8', env });
      expect(r.status, r.stderr).toBe(0);
      const own = join(tmp, `hpc-cache-${process.getuid!()}`);
      expect(r.stdout.trim().split('\n').at(-1)).toBe(own);
      expect(readFileSync(join(own, 'hcrl_sa', 'a.pt'), 'utf8')).toBe(
        readFileSync(join(src, 'a.pt'), 'utf8'),
      );
      // A link in the place of the user's own root: refused, nothing read through it.
      rmSync(own, { recursive: true });
      symlinkSync(join(tmp, 'hpc-cache'), own);
      const linked = spawnSync('bash', [script, 'hcrl_sa', src], { encoding: 'utf8', env });
      expect(linked.status).not.toBe(0);
      expect(linked.stderr).toContain('is not yours alone');
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  // Needs root to mount a tmpfs (the CI container runs as root); reported, not silently passed, otherwise.
  const isRoot = runsHere(
    process.getuid?.() === 0,
    'stage-data falling back to scratch when the local disk is too small',
    'mounting the small tmpfs it needs takes root',
  );
  it.runIf(isRoot)(
    'falls back to reading scratch directly, with a warning, when the local disk is too small',
    () => {
      const src = makeDataset('hcrl_sa', { 'big.pt': 3 * 1024 * 1024, 'small.json': 10 });
      const small = join(dir, 'small-tmp');
      mkdirSync(small);
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', small]);
      try {
        const r = stage(['hcrl_sa', src], { TMPDIR: small, HPC_STAGE_RESERVE_MB: '0' });
        expect(r.status).toBe(0);
        expect(r.stderr).toMatch(
          /WARNING: hcrl_sa: 3 MB still to copy but .* has \d+ MB free .*reading it from scratch directly/,
        );
        const link = join(small, 'hpc-cache', 'hcrl_sa');
        expect(lstatSync(link).isSymbolicLink()).toBe(true);
        expect(readlinkSync(link)).toBe(src);
        expect(existsSync(join(small, 'hpc-cache', 'hcrl_sa.partial'))).toBe(false);
      } finally {
        execFileSync('umount', [small]);
      }
    },
  );

  it('fails, leaving nothing visible, when a copy does not match the source after copying', () => {
    const src = makeDataset('hcrl_sa', cacheFiles);
    // A cp that damages what it writes (as a failing disk would): real cp, then cut train.pt short.
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    writeFileSync(
      join(bin, 'cp'),
      '#!/bin/bash\n/bin/cp "$@" || exit\nwhile (($#)); do if [[ $1 == -t ]]; then t=$2; fi; shift; done\n' +
        '[[ -f $t/train.pt ]] && truncate -s 10 "$t/train.pt"\nexit 0\n',
      { mode: 0o755 },
    );
    const r = stage(['hcrl_sa', src], { PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}` });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      /dataset hcrl_sa: 1 staged file\(s\) do not match the source \(size mtime\): train\.pt \(source: 300000 \d+, staged: 10 \d+\)/,
    );
    expect(existsSync(join(local, 'hpc-cache', 'hcrl_sa'))).toBe(false);
  });
});
