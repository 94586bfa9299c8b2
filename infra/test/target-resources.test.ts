// The file and directory providers against the real local filesystem.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as dir from '../providers/target-directory.impl.ts';
import * as file from '../providers/target-file.impl.ts';

const local = { kind: 'local' as const };

describe('TargetFile provider', () => {
  it('installs an executable script, reads hand edits back as drift, and removes it', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-file-'));
    const path = join(root, 'scripts', 'epilog.sh');
    const inputs = { connection: local, path, content: '#!/bin/bash\necho one\n', mode: '0755' };
    const { id, outs } = await file.create(inputs);
    expect(readFileSync(path, 'utf8')).toBe(inputs.content);
    expect(statSync(path).mode & 0o777).toBe(0o755);

    expect((await file.diff(id, outs, inputs)).changes).toBe(false);
    expect(await file.diff(id, outs, { ...inputs, content: '#!/bin/bash\necho two\n' })).toMatchObject({
      changes: true,
      replaces: [],
    });
    expect(await file.diff(id, outs, { ...inputs, path: join(root, 'x.sh') })).toMatchObject({
      changes: true,
      replaces: ['path'],
    });

    writeFileSync(path, '#!/bin/bash\necho edited by hand\n');
    const live = await file.read(id, outs);
    expect(live.props?.content).toContain('edited by hand');
    expect((await file.diff(id, live.props!, inputs)).changes).toBe(true);

    await file.remove(id, outs);
    expect(existsSync(path)).toBe(false);
    expect((await file.read(id, outs)).id).toBe('');
  });
});

describe('TargetDirectory provider', () => {
  it('creates a group-shared directory with its README and never deletes it', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-dir-'));
    const path = join(root, 'scratch', 'kd-gat');
    const inputs = { connection: local, path, mode: '2770', readme: '# scratch\n' };
    const { id, outs } = await dir.create(inputs);
    expect(statSync(path).mode & 0o7777).toBe(0o2770);
    expect(outs.appliedMode).toBe('2770');
    expect(readFileSync(join(path, 'README.md'), 'utf8')).toBe('# scratch\n');
    expect((await dir.diff(id, outs, inputs)).changes).toBe(false);

    writeFileSync(join(path, 'cached.pt'), 'data');
    await dir.remove();
    expect(readFileSync(join(path, 'cached.pt'), 'utf8')).toBe('data');
  });

  it('removes a directory declared remove-if-empty once empty, and keeps it while it holds anything', async () => {
    const root = mkdtempSync(join(tmpdir(), 'kdgat-dir-'));
    const path = join(root, 'kernels', 'gnn-rapids');
    const inputs = { connection: local, path, mode: '0755', onDelete: 'remove-if-empty' as const };
    const { id, outs } = await dir.create(inputs);
    expect(statSync(path).mode & 0o7777).toBe(0o755);
    // a change of what deleting does is an update of the resource, not a replacement
    const { onDelete: _, ...retained } = inputs;
    expect(await dir.diff(id, outs, retained)).toMatchObject({ changes: true, replaces: [] });

    writeFileSync(join(path, 'logo-64x64.png'), 'put there by hand');
    await dir.remove(id, outs);
    expect(readFileSync(join(path, 'logo-64x64.png'), 'utf8')).toBe('put there by hand');
    rmSync(join(path, 'logo-64x64.png'));
    await dir.remove(id, outs);
    expect(existsSync(path)).toBe(false);
    await dir.remove(id, outs); // gone already: nothing to do
  });
});
