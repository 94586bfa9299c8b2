import { describe, expect, it } from 'vitest';
import { diffLocks, formatLockDiff, lockPackages } from './lock.ts';

const CONDA_BEFORE = `# This file may be used to create an environment using:
# platform: linux-64
@EXPLICIT
https://conda.anaconda.org/conda-forge/linux-64/numpy-2.3.1-py312h6cf2f7f_0.conda#0a1b2c3d4e5f60718293a4b5c6d7e8f9
https://conda.anaconda.org/conda-forge/noarch/typing-extensions-4.12.2-pyha770c72_0.conda#aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
https://conda.anaconda.org/conda-forge/linux-64/python-3.12.8-h9e4cc4f_1_cpython.conda#bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
https://conda.anaconda.org/conda-forge/linux-64/six-1.16.0-pyh6c4a22f_0.tar.bz2#cccccccccccccccccccccccccccccccc
`;
const CONDA_AFTER = CONDA_BEFORE.replace('numpy-2.3.1-py312h6cf2f7f_0', 'numpy-2.3.2-py312h6cf2f7f_0')
  .replace(/^.*six-1\.16\.0.*\n/m, '')
  .concat(
    'https://conda.anaconda.org/conda-forge/noarch/optuna-4.1.0-pyhd8ed1ab_0.conda#dddddddddddddddddddddddddddddddd\n',
  );

describe('explicit conda locks', () => {
  it('reads name, version and build from each package URL (names may contain dashes)', () => {
    const p = lockPackages(CONDA_BEFORE);
    expect(p.get('numpy')).toBe('2.3.1-py312h6cf2f7f_0');
    expect(p.get('typing-extensions')).toBe('4.12.2-pyha770c72_0');
    expect(p.get('six')).toBe('1.16.0-pyh6c4a22f_0');
    expect(p.size).toBe(4);
  });

  it('lists changed, added and removed packages', () => {
    const diff = diffLocks(CONDA_BEFORE, CONDA_AFTER);
    expect(formatLockDiff(diff)).toEqual([
      '~ numpy 2.3.1-py312h6cf2f7f_0 -> 2.3.2-py312h6cf2f7f_0',
      '+ optuna 4.1.0-pyhd8ed1ab_0',
      '- six 1.16.0-pyh6c4a22f_0',
    ]);
    expect(formatLockDiff(diffLocks(CONDA_BEFORE, CONDA_BEFORE))).toEqual([]);
  });

  it("reads the pip part of a conda environment (`# pip name==version` lines), conda's own packages first", () => {
    const pip = (psutil: string) =>
      `${CONDA_BEFORE}# pip packages of the environment (pip list --format=freeze):\n# pip Numpy==9.9.9\n# pip psutil==${psutil}\n# pip torch==2.9.1\n`;
    const p = lockPackages(pip('7.2.2'));
    expect(p.get('torch')).toBe('2.9.1');
    expect(p.get('numpy')).toBe('2.3.1-py312h6cf2f7f_0');
    expect(formatLockDiff(diffLocks(pip('7.2.2'), pip('7.2.3')))).toEqual(['~ psutil 7.2.2 -> 7.2.3']);
  });
});

describe('pip freeze locks (venv environments)', () => {
  it('normalises names and reads pins and direct URLs', () => {
    const before =
      'Torch==2.8.0\npyyaml==6.0.2\nkdgat @ file:///repo/python\n# comment\n-e git+https://x/y#egg=z\n';
    const after = 'torch==2.8.1\nPyYAML==6.0.2\nkdgat @ file:///repo/python\n';
    expect(lockPackages(before).get('pyyaml')).toBe('6.0.2');
    expect(formatLockDiff(diffLocks(before, after))).toEqual(['~ torch 2.8.0 -> 2.8.1']);
  });
});
