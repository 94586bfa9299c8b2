// A directory on the target with a mode (and optionally a group and a README). Deleting the
// resource never deletes the directory by default: cached data is retained (the resources are also
// created with retainOnDelete, so the CLI shows "[retain]"). One declared `remove-if-empty` (a
// notebook kernel's) is removed when empty, and kept when anything besides the stack's files is in it.
import type * as pulumi from '@pulumi/pulumi';
import { changedKeys, siteExecutor, targetKey } from './common.ts';
import type { Connection } from '@kdgat/transport';
import { ensureDirectory, readFile, removeEmptyDirectory, statMode, writeFile } from './target-fs.ts';

export interface TargetDirectoryInputs {
  connection: Connection;
  path: string;
  /** Octal, e.g. '2770'. */
  mode: string;
  group?: string;
  /** README.md written at the directory's root. */
  readme?: string;
  /** Absent: retained on delete. */
  onDelete?: 'remove-if-empty';
}
export interface TargetDirectoryOutputs extends TargetDirectoryInputs {
  /** The mode applied: the requested one, or without setgid where the filesystem refused it. */
  appliedMode: string;
}

export async function diff(
  _id: string,
  olds: TargetDirectoryOutputs,
  news: TargetDirectoryInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const replaces = changedKeys(olds as never, news as never, ['path']);
  if (targetKey(olds.connection) !== targetKey(news.connection)) replaces.push('connection');
  const changed = changedKeys(olds as never, news as never, [
    'mode',
    'group',
    'readme',
    'onDelete',
    'connection',
  ]);
  return { changes: replaces.length + changed.length > 0, replaces, deleteBeforeReplace: false };
}

async function apply(inputs: TargetDirectoryInputs): Promise<TargetDirectoryOutputs> {
  const ex = siteExecutor(inputs.connection);
  const appliedMode = await ensureDirectory(ex, inputs.path, inputs.mode, inputs.group);
  if (inputs.readme !== undefined) await writeFile(ex, `${inputs.path}/README.md`, inputs.readme, '0664');
  return { ...inputs, appliedMode };
}

export async function create(
  inputs: TargetDirectoryInputs,
): Promise<{ id: string; outs: TargetDirectoryOutputs }> {
  return { id: `${targetKey(inputs.connection)}:${inputs.path}`, outs: await apply(inputs) };
}

export async function update(
  _id: string,
  _olds: TargetDirectoryOutputs,
  news: TargetDirectoryInputs,
): Promise<{ outs: TargetDirectoryOutputs }> {
  return { outs: await apply(news) };
}

export async function read(
  id: string,
  props: TargetDirectoryOutputs,
): Promise<{ id: string; props: TargetDirectoryOutputs }> {
  const ex = siteExecutor(props.connection);
  const mode = await statMode(ex, props.path);
  if (mode === null) return { id: '', props: {} as TargetDirectoryOutputs };
  const out: TargetDirectoryOutputs = { ...props, mode: mode === props.appliedMode ? props.mode : mode };
  if (props.readme !== undefined) {
    const readme = await readFile(ex, `${props.path}/README.md`);
    if (readme !== null) out.readme = readme;
    else delete out.readme;
  }
  return { id, props: out };
}

/** Data is never deleted by this stack: the directory stays, unless it was declared removable and is empty. */
export async function remove(_id?: string, props?: TargetDirectoryOutputs): Promise<void> {
  if (props?.onDelete !== 'remove-if-empty') return;
  await removeEmptyDirectory(siteExecutor(props.connection), props.path);
}
