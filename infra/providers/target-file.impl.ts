// A text file on the target: written atomically with a mode; read back for drift; removed on delete.
import type * as pulumi from '@pulumi/pulumi';
import { changedKeys, sha256, siteExecutor, targetKey } from './common.ts';
import type { Connection } from '@kdgat/transport';
import { readFile, removeFile, statMode, writeFile } from './target-fs.ts';

export interface TargetFileInputs {
  connection: Connection;
  path: string;
  content: string;
  /** Octal, e.g. '0755'. */
  mode: string;
}
export interface TargetFileOutputs extends TargetFileInputs {
  sha256: string;
}

export async function diff(
  _id: string,
  olds: TargetFileOutputs,
  news: TargetFileInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const replaces = changedKeys(olds as never, news as never, ['path']);
  if (targetKey(olds.connection) !== targetKey(news.connection)) replaces.push('connection');
  const changed = changedKeys(olds as never, news as never, ['content', 'mode', 'connection']);
  return { changes: replaces.length + changed.length > 0, replaces, deleteBeforeReplace: false };
}

export async function create(inputs: TargetFileInputs): Promise<{ id: string; outs: TargetFileOutputs }> {
  await writeFile(siteExecutor(inputs.connection), inputs.path, inputs.content, inputs.mode);
  return {
    id: `${targetKey(inputs.connection)}:${inputs.path}`,
    outs: { ...inputs, sha256: sha256(inputs.content) },
  };
}

export async function update(
  _id: string,
  _olds: TargetFileOutputs,
  news: TargetFileInputs,
): Promise<{ outs: TargetFileOutputs }> {
  await writeFile(siteExecutor(news.connection), news.path, news.content, news.mode);
  return { outs: { ...news, sha256: sha256(news.content) } };
}

/** The live file: a hand edit shows up as a content change on refresh, a removed file as gone. */
export async function read(
  id: string,
  props: TargetFileOutputs,
): Promise<{ id: string; props: TargetFileOutputs }> {
  const ex = siteExecutor(props.connection);
  const content = await readFile(ex, props.path);
  if (content === null) return { id: '', props: {} as TargetFileOutputs };
  const mode = (await statMode(ex, props.path)) ?? props.mode;
  return { id, props: { ...props, content, mode, sha256: sha256(content) } };
}

export async function remove(_id: string, props: TargetFileOutputs): Promise<void> {
  await removeFile(siteExecutor(props.connection), props.path);
}
