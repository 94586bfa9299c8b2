import { describe, expect, it } from 'vitest';
import { linuxX86_64 } from './markers.ts';
import { LockfileError, pipelinePins, wheelRank } from './uv-lock.ts';

// A researcher's uv.lock with a package only a second index serves (PyG's wheels of torch-scatter,
// built per torch and CUDA): the site must take that one from there, and the rest from its index.
const PYG = 'https://data.pyg.org/whl/torch-2.8.0+cu126.html';
const lock = (scatterWheels: string) => `version = 1
requires-python = ">=3.11"

[[package]]
name = "research"
version = "0.1.0"
source = { editable = "." }
dependencies = [
    { name = "numpy" },
    { name = "torch-scatter" },
]

[[package]]
name = "numpy"
version = "2.4.6"
source = { registry = "https://pypi.org/simple" }
wheels = [
    { url = "https://files.pythonhosted.org/numpy-2.4.6-cp312-cp312-manylinux_2_28_x86_64.whl", hash = "sha256:aa" },
]

[[package]]
name = "torch-scatter"
version = "2.1.2+pt28cu126"
source = { registry = "${PYG}" }
wheels = [
${scatterWheels}
]
`;
const WHEELS = `    { url = "https://data.pyg.org/whl/torch-2.8.0%2Bcu126/torch_scatter-2.1.2%2Bpt28cu126-cp311-cp311-linux_x86_64.whl", hash = "sha256:11" },
    { url = "https://data.pyg.org/whl/torch-2.8.0%2Bcu126/torch_scatter-2.1.2%2Bpt28cu126-cp312-cp312-linux_x86_64.whl", hash = "sha256:12" },
    { url = "https://data.pyg.org/whl/torch-2.8.0%2Bcu126/torch_scatter-2.1.2%2Bpt28cu126-cp312-cp312-win_amd64.whl", hash = "sha256:99" },`;

describe("a uv.lock's second index", () => {
  it("gives its packages the direct reference of the target's wheel, and the default index's their pins", () => {
    expect(pipelinePins(lock(WHEELS), linuxX86_64('3.12'), 'research', 'uv.lock')).toEqual([
      { name: 'numpy', version: '2.4.6' },
      {
        name: 'torch-scatter',
        version: '2.1.2+pt28cu126',
        url: 'https://data.pyg.org/whl/torch-2.8.0%2Bcu126/torch_scatter-2.1.2%2Bpt28cu126-cp312-cp312-linux_x86_64.whl#sha256=12',
      },
    ]);
    expect(pipelinePins(lock(WHEELS), linuxX86_64('3.11'), 'research', 'uv.lock')[1]!.url).toMatch(
      /cp311-cp311-linux_x86_64\.whl#sha256=11$/,
    );
  });

  it('refuses a package of a second index with no file for the target, naming the index and the wheels it has', () => {
    const onlyWindows = WHEELS.split('\n').slice(2).join('\n');
    expect(() => pipelinePins(lock(onlyWindows), linuxX86_64('3.12'), 'research', 'uv.lock')).toThrow(
      LockfileError,
    );
    expect(() => pipelinePins(lock(onlyWindows), linuxX86_64('3.12'), 'research', 'uv.lock')).toThrow(
      /torch-scatter 2\.1\.2\+pt28cu126 comes from https:\/\/data\.pyg\.org\/whl\/torch-2\.8\.0\+cu126\.html, which has no file for Python 3\.12 on Linux x86_64 .*win_amd64/,
    );
  });

  it('ranks wheels as pip would for CPython on Linux x86_64', () => {
    const env = linuxX86_64('3.12');
    expect(wheelRank('a-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl', env)).toBe(0);
    expect(wheelRank('a-1-cp39-abi3-manylinux_2_28_x86_64.whl', env)).toBe(2);
    expect(wheelRank('a-1-py3-none-any.whl', env)).toBe(5);
    expect(wheelRank('a-1-cp312-cp312-macosx_11_0_arm64.whl', env)).toBeUndefined();
    expect(wheelRank('a-1-cp313-cp313-linux_x86_64.whl', env)).toBeUndefined();
    expect(wheelRank('a-1-cp312-cp312-manylinux_2_28_aarch64.whl', env)).toBeUndefined();
  });
});
