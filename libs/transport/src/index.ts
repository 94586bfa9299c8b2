// @kdgat/transport: how infra and the runner reach a site — one executor per connection (local, or
// ssh with a pinned host key), one quoting rule, one timeout policy, and the site's files.
import { executorFor, type Connection, type Session } from './executor.ts';

export {
  CommandFailedError,
  ConnectionError,
  executorFor,
  knownHostsLine,
  localExecutor,
  remoteCommandLine,
  runChecked,
  sshArgs,
  sshExecutor,
  type Connection,
  type Executor,
  type InteractiveResult,
  type MasterConnection,
  type RunOptions,
  type RunResult,
  type Session,
  type SshConnection,
} from './executor.ts';
export { NotPrivateError, SiteFiles } from './site-files.ts';

const sessions = new Map<string, Session>();

/** The key a connection's session is shared under: its target and its identity. */
function keyOf(connection: Connection): string {
  return connection.kind === 'local'
    ? 'local'
    : JSON.stringify([
        connection.user,
        connection.host,
        connection.port,
        connection.hostKey,
        connection.privateKeyPath ?? '',
        connection.proxy ?? null,
      ]);
}

/**
 * The one multiplexed session of this process to a connection's target: a command of the runner
 * opens it on first use and closes it at its end (`closeSessions`).
 */
export function sessionFor(connection: Connection): Session {
  const key = keyOf(connection);
  let s = sessions.get(key);
  if (!s) {
    s = executorFor(connection, { master: 'session' });
    sessions.set(key, s);
  }
  return s;
}

/** Closes every session this process opened (their SSH masters exit). */
export function closeSessions(): void {
  for (const s of sessions.values()) s.close();
  sessions.clear();
}
