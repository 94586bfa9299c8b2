// Pieces shared by the provider implementations.
import { createHash } from 'node:crypto';
import { executorFor, type Connection, type Executor } from '@kdgat/transport';

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * Where a provider call runs its commands. On a site over SSH every call of a `pulumi` command (and
 * of the next one, within ControlPersist) rides one shared master connection instead of a handshake
 * and login per command (transport's sharedControlPath).
 */
export function siteExecutor(connection: Connection): Executor {
  return executorFor(connection, { master: 'shared' });
}

/** Identity of the machine a connection reaches; a change of it means a new resource, a new key does not. */
export function targetKey(connection: Connection): string {
  return connection.kind === 'local' ? 'local' : `${connection.user}@${connection.host}:${connection.port}`;
}

/** Names of the keys whose values differ (compared as JSON). */
export function changedKeys(
  olds: Record<string, unknown>,
  news: Record<string, unknown>,
  keys: readonly string[],
): string[] {
  return keys.filter((k) => JSON.stringify(olds[k] ?? null) !== JSON.stringify(news[k] ?? null));
}
