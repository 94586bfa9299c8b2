// Files on the site through a session: a directory put in place atomically (a tar stream unpacked
// beside its destination, then renamed), a file replaced atomically, and a directory copied back
// with rsync. The same calls serve a local session, so one code path covers both connections.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { CommandFailedError, runChecked, type Session } from './executor.ts';

const TIMEOUT_S = 600;

// $1: the destination. Unpacks stdin beside it and renames the result into place; a destination
// that exists already is left as it is (exit 17), and a failed unpack leaves nothing behind.
const PUT_TREE = `set -eu
dest=$1
if [ -e "$dest" ]; then echo "$dest exists" >&2; exit 17; fi
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$dest.partial.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -xzf - -C "$tmp"
chmod 755 "$tmp"
mv -T "$tmp" "$dest"
trap - EXIT`;

// $1: the file. Writes stdin beside it and renames it over the old one.
const PUT_FILE = `set -eu
dest=$1
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp "$dest.XXXXXX.tmp")
trap 'rm -f "$tmp"' EXIT
cat >"$tmp"
chmod 644 "$tmp"
mv -f "$tmp" "$dest"
trap - EXIT`;

// $1: the link, $2: what it points at. A new link is made in a fresh directory of its own beside
// it (mktemp: no name another user could have planted) and renamed over the old one (rename(2)
// replaces a link atomically): a reader follows the old target or the new one, never none.
const POINT_LINK = `set -eu
link=$1
mkdir -p "$(dirname "$link")"
tmp=$(mktemp -d "$link.hpc-tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
ln -s "$2" "$tmp/link"
mv -T "$tmp/link" "$link"
trap - EXIT
rmdir "$tmp"`;

// $1: a directory that must be the login user's alone. Made (mode 700) when missing; refused (exit
// 18, the reason on stderr) when it is a link, not a directory, someone else's, or writable by
// the group or others: what is in it would run as this user.
const PRIVATE_DIR = `set -eu
d=$1
mkdir -p "$(dirname "$d")"
# Made here, or by a run of this user's at the same moment (then checked like any other).
if [ ! -e "$d" ] && [ ! -L "$d" ] && ! mkdir -m 700 "$d" 2>/dev/null && [ ! -d "$d" ]; then
  echo "cannot make $d" >&2; exit 1
fi
if [ -L "$d" ] || [ ! -d "$d" ]; then echo "$d is not a directory (a link or a file is there)" >&2; exit 18; fi
uid=$(stat -c %u "$d")
if [ "$uid" != "$(id -u)" ]; then echo "$d belongs to $(stat -c %U "$d") (uid $uid), not to $(id -un)" >&2; exit 18; fi
if [ -n "$(find "$d" -maxdepth 0 -perm /022)" ]; then echo "$d is writable by others (mode $(stat -c %a "$d"))" >&2; exit 18; fi`;

/** A directory on the site that is not the login user's own (see `ensurePrivateDir`). */
export class NotPrivateError extends Error {
  readonly dir: string;
  readonly reason: string;
  constructor(dir: string, reason: string) {
    super(
      `${reason}: what the runner puts in ${dir} runs as you, so it must be yours alone (mode 700); nothing was queued. ` +
        `Remove it (or ask its owner to), then run the command again`,
    );
    this.name = 'NotPrivateError';
    this.dir = dir;
    this.reason = reason;
  }
}

/** The site's files as a session reaches them. */
export class SiteFiles {
  readonly session: Session;
  constructor(session: Session) {
    this.session = session;
  }

  /** Whether a path exists on the site. */
  async exists(path: string): Promise<boolean> {
    const r = await this.session.run(['test', '-e', path], { timeoutSeconds: 60 });
    return r.code === 0;
  }

  /**
   * Puts a local directory at `dest` on the site, whole or not at all. Returns false when `dest`
   * exists already (it is left untouched: content-addressed callers reuse it).
   */
  async putTree(localDir: string, dest: string): Promise<boolean> {
    const tar = spawnSync('tar', ['-C', localDir, '-czf', '-', '.'], { maxBuffer: 1 << 30 });
    if (tar.status !== 0) throw new Error(`tar of ${localDir} failed: ${tar.stderr.toString().trim()}`);
    const r = await this.session.run(['sh', '-c', PUT_TREE, 'sh', dest], {
      input: tar.stdout,
      timeoutSeconds: TIMEOUT_S,
    });
    if (r.code === 17) return false;
    if (r.code !== 0 || r.timedOut)
      throw new CommandFailedError(this.session.target, `putting ${localDir} at ${dest}`, r);
    return true;
  }

  /** Replaces one file on the site (readers see the old or the new one, never half). */
  async putFile(dest: string, content: string | Buffer): Promise<void> {
    await runChecked(this.session, ['sh', '-c', PUT_FILE, 'sh', dest], {
      input: content,
      timeoutSeconds: TIMEOUT_S,
      what: `writing ${dest}`,
    });
  }

  /**
   * Makes `dir` (mode 700) or checks it: a directory owned by the login user, writable by nobody
   * else, not a link. Throws NotPrivateError saying why otherwise (a neighbour planted it).
   */
  async ensurePrivateDir(dir: string): Promise<void> {
    const r = await this.session.run(['sh', '-c', PRIVATE_DIR, 'sh', dir], { timeoutSeconds: 60 });
    if (r.code === 18) throw new NotPrivateError(dir, r.stderr.trim());
    if (r.code !== 0 || r.timedOut)
      throw new CommandFailedError(this.session.target, `making ${dir} private`, r);
  }

  /** Points the symbolic link `link` at `target` (a relative target is read from the link's directory), atomically. */
  async pointLink(link: string, target: string): Promise<void> {
    await runChecked(this.session, ['sh', '-c', POINT_LINK, 'sh', link, target], {
      timeoutSeconds: 60,
      what: `pointing ${link} at ${target}`,
    });
  }

  /**
   * Copies the site's `dir` into `localDir` (only what changed; nothing local is deleted unless
   * `mirror`), leaving out what matches `exclude` (rsync patterns: checkpoints, caches). `mirror`:
   * a local file the site no longer has is deleted too (what `exclude` matches is kept).
   */
  async pull(
    dir: string,
    localDir: string,
    exclude: readonly string[] = [],
    opts: { mirror?: boolean } = {},
  ): Promise<void> {
    mkdirSync(localDir, { recursive: true });
    const shell = this.session.remoteShell();
    const args = [
      '-a',
      ...(opts.mirror ? ['--delete'] : []),
      // A file this machine changed since (a run's manifest, written here first) is kept.
      '--update',
      '--timeout=120',
      ...exclude.map((e) => `--exclude=${e}`),
      ...(shell ? ['-e', shell.argv.map(rsyncWord).join(' ')] : []),
      `${shell ? `${shell.host}:` : ''}${dir}/`,
      `${localDir}/`,
    ];
    const r = await rsync(args);
    if (r.code !== 0)
      throw new CommandFailedError(this.session.target, `copying ${dir} from the site`, {
        code: r.code,
        stdout: '',
        stderr: r.stderr,
        timedOut: false,
      });
  }
}

/** rsync splits `-e` on spaces and honours double quotes. */
function rsyncWord(word: string): string {
  return /^[A-Za-z0-9_./=:@%+,-]+$/.test(word) ? word : `"${word.replace(/(["\\$`])/g, '\\$1')}"`;
}

function rsync(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('rsync', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGTERM'), TIMEOUT_S * 1000);
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`could not start rsync: ${e.message}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 128, stderr });
    });
  });
}
