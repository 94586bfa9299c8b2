// File operations on the target (this machine or a login node), each one a fixed `sh -c` script
// whose values arrive as positional arguments, so paths never meet shell parsing.
import { runChecked, type Executor } from '@kdgat/transport';

const QUICK = { timeoutSeconds: 120 };

/** Contents of a file, or null when it does not exist. */
export async function readFile(ex: Executor, path: string): Promise<string | null> {
  const result = await ex.run(
    ['sh', '-c', 'if [ -f "$1" ]; then cat -- "$1"; else exit 3; fi', 'sh', path],
    QUICK,
  );
  if (result.code === 3) return null;
  if (result.code !== 0) throw new Error(`reading ${path} on ${ex.target} failed: ${result.stderr.trim()}`);
  return result.stdout;
}

/**
 * Writes a file atomically (temp file + rename), creating parent directories. mode is octal text,
 * e.g. '0755'. The temporary file is mktemp's (created new, never through a name someone else in a
 * group-writable directory could have planted as a link to a file of the user's).
 */
export async function writeFile(ex: Executor, path: string, content: string, mode: string): Promise<void> {
  await runChecked(
    ex,
    [
      'sh',
      '-c',
      'set -e; mkdir -p -- "$(dirname -- "$1")"; tmp=$(mktemp "$1.kdgat-tmp.XXXXXX"); trap \'rm -f "$tmp"\' EXIT; cat > "$tmp"; chmod "$2" "$tmp"; mv -f -- "$tmp" "$1"; trap - EXIT',
      'sh',
      path,
      mode,
    ],
    { ...QUICK, input: content, what: `writing ${path}` },
  );
}

export async function removeFile(ex: Executor, path: string): Promise<void> {
  await runChecked(ex, ['rm', '-f', '--', path], { ...QUICK, what: `removing ${path}` });
}

/** Removes a directory when it is empty; one that holds anything, or is gone already, is left as it is. */
export async function removeEmptyDirectory(ex: Executor, path: string): Promise<void> {
  await runChecked(
    ex,
    ['sh', '-c', 'if [ -d "$1" ] && [ -z "$(ls -A -- "$1")" ]; then rmdir -- "$1"; fi', 'sh', path],
    { ...QUICK, what: `removing directory ${path}` },
  );
}

export async function removeTree(ex: Executor, path: string, timeoutSeconds = 1800): Promise<void> {
  await runChecked(ex, ['rm', '-rf', '--', path], { timeoutSeconds, what: `removing ${path}` });
}

export async function pathExists(ex: Executor, path: string): Promise<boolean> {
  const result = await ex.run(['test', '-e', path], QUICK);
  return result.code === 0;
}

/**
 * Creates a directory (and parents) and applies mode and, when given, group. Returns the mode
 * actually applied: a setgid mode falls back to the plain mode where the filesystem refuses it.
 */
export async function ensureDirectory(
  ex: Executor,
  path: string,
  mode: string,
  group?: string,
): Promise<string> {
  const script = [
    'set -e',
    'mkdir -p -- "$1"',
    'if [ -n "$3" ]; then chgrp -- "$3" "$1"; fi',
    // setgid (2xxx) keeps the group on new files; some filesystems refuse it for non-members.
    'if chmod "$2" "$1" 2>/dev/null; then echo "$2"; else m=$(printf "%04o" $((0$2 & 0777))); chmod "$m" "$1"; echo "$m"; fi',
  ].join('\n');
  const out = await runChecked(ex, ['sh', '-c', script, 'sh', path, mode, group ?? ''], {
    ...QUICK,
    what: `creating directory ${path}`,
  });
  return out.trim();
}

/** Octal mode of a path (e.g. '2770'), or null when it does not exist. */
export async function statMode(ex: Executor, path: string): Promise<string | null> {
  const result = await ex.run(['stat', '-c', '%a', '--', path], QUICK);
  if (result.code !== 0) return null;
  return result.stdout.trim().padStart(4, '0');
}
