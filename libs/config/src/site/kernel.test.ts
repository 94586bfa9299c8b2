import { describe, expect, it } from 'vitest';
import { ClusterProfileSchema } from '../cluster/schema.ts';
import { clusterPresets } from '../cluster/presets.ts';
import { KernelDeclarationSchema, kernelDefaultCodeFor, kernelNameOf, kernelsDirFor } from './kernel.ts';

/** The refusal of a declaration as `path: message` lines, as the stack config reports it. */
function refusal(value: unknown): string[] {
  const r = KernelDeclarationSchema.safeParse(value);
  expect(r.success).toBe(false);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
}

describe('KernelDeclarationSchema', () => {
  it('takes a display name alone; modules default to none, name and code to the site defaults', () => {
    expect(KernelDeclarationSchema.parse({ displayName: 'KD-GAT (gnn-rapids, CUDA 12) ✓' })).toEqual({
      displayName: 'KD-GAT (gnn-rapids, CUDA 12) ✓',
      modules: [],
    });
    const full = {
      name: 'kdgat-gpu',
      displayName: 'KD-GAT GPU',
      modules: ['cuda/12.4.1', 'git/2.39.0'],
      code: '/users/PAS1266/jdoe/kd-gat/python',
    };
    expect(KernelDeclarationSchema.parse(full)).toEqual(full);
    expect(kernelNameOf({}, 'gnn-rapids')).toBe('gnn-rapids');
    expect(kernelNameOf({ name: 'kdgat-gpu' }, 'gnn-rapids')).toBe('kdgat-gpu');
  });

  it('refuses a display name with control or format characters, edge spaces, or past its length, naming the value', () => {
    for (const bad of [
      'two\nlines',
      'tab\there',
      'bidi \u202eevil',
      'zero\u200bwidth',
      ' padded',
      '',
      'x'.repeat(101),
    ]) {
      const [line] = refusal({ displayName: bad });
      expect(line).toMatch(/^displayName: /);
      expect(line).toContain(JSON.stringify(bad));
      expect(line).toContain('expected a display name of 1 to 100 printable characters');
    }
    expect(refusal({})).toEqual([
      'displayName: undefined: expected a display name of 1 to 100 printable characters without leading or trailing spaces, e.g. "My project (gnn-rapids)"',
    ]);
  });

  it('refuses a module, name or code path that could carry shell text, and unknown keys', () => {
    expect(refusal({ displayName: 'K', modules: ['cuda/12.4.1', 'cuda; rm -rf ~'] })).toEqual([
      'modules.1: "cuda; rm -rf ~": expected a module name such as cuda/12.4.1',
    ]);
    expect(refusal({ displayName: 'K', name: '../escape' })[0]).toMatch(
      /^name: "..\/escape": expected a name of letters, digits/,
    );
    expect(refusal({ displayName: 'K', code: 'relative/python' })[0]).toMatch(
      /^code: "relative\/python": expected an absolute path on the site/,
    );
    expect(refusal({ displayName: 'K', code: '/p/$(id)' })[0]).toMatch(/^code: "\/p\/\$\(id\)": expected/);
    expect(refusal({ displayName: 'K', modlues: ['x'] })).toEqual([
      ': unknown key modlues: expected only name, displayName, modules, code',
    ]);
  });
});

describe('kernelsDirFor', () => {
  const pitzer = ClusterProfileSchema.parse(clusterPresets['osc-pitzer']);

  it("is the profile's paths.kernelsDir when it names one", () => {
    const declared = ClusterProfileSchema.parse({
      ...pitzer,
      paths: { ...pitzer.paths, kernelsDir: '/users/PAS1266/jdoe/.local/share/jupyter/kernels/' },
    });
    expect(kernelsDirFor(declared)).toBe('/users/PAS1266/jdoe/.local/share/jupyter/kernels');
  });

  it("is this machine's home's Jupyter kernels dir for a local site, and unknown for a remote one", () => {
    expect(kernelsDirFor({ connection: { kind: 'local' }, paths: {} }, '/home/me/')).toBe(
      '/home/me/.local/share/jupyter/kernels',
    );
    const ssh = {
      kind: 'ssh' as const,
      host: 'pitzer.osc.edu',
      port: 22,
      user: 'jdoe',
      hostKey: 'ssh-ed25519 AAAA',
    };
    expect(kernelsDirFor({ ...pitzer, connection: ssh })).toBeNull();
  });

  it('refuses a kernels dir with ~ or shell text in the profile', () => {
    const r = ClusterProfileSchema.safeParse({
      ...pitzer,
      paths: { ...pitzer.paths, kernelsDir: '~/.local/share/jupyter/kernels' },
    });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.path).toEqual(['paths', 'kernelsDir']);
  });
});

describe('kernelDefaultCodeFor', () => {
  it("is the code of the latest run the site user shipped on a site over SSH (in their own code root), and the environment's own on this machine", () => {
    const ssh = { kind: 'ssh' as const, user: 'jdoe' };
    expect(
      kernelDefaultCodeFor({ connection: ssh, paths: { scratchRoot: '/fs/scratch/PAS1266/kd-gat/' } }),
    ).toBe('/fs/scratch/PAS1266/kd-gat/code/jdoe/current');
    expect(
      kernelDefaultCodeFor({ connection: { kind: 'local' }, paths: { scratchRoot: '/r/.hpc/scratch' } }),
    ).toBeUndefined();
  });
});
