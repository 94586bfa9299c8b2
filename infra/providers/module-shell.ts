// Commands that need the cluster profile's modules (the conda frontend's, CUDA's) and the
// environment's own (its spec's `modules`, e.g. the Python a venv is made from) run in a login
// shell that loads them first, the profile's then the environment's. The script is rendered by @kdgat/slurm-templates from the validated
// profile (module names and the Lmod init path through its one quoting helper), the same lines a
// batch job uses to find `module`; the command itself follows as arguments (`exec "$@"`), so on SSH
// it is quoted word by word like any other argv.
import type { ClusterProfile } from '@kdgat/config';
import { DEFAULT_LMOD_INIT, loginModules, renderModuleShell } from '@kdgat/slurm-templates';
import type { Executor } from '@kdgat/transport';

export type SiteModules = ClusterProfile['modules'];

/**
 * What a command needs to know about the site: the profile's name (for messages) and its modules,
 * and the environment's own modules, loaded after the profile's.
 */
export interface ModuleSite {
  profile?: string;
  modules?: SiteModules;
  environmentModules?: readonly string[];
}

/** Status of the module preamble when the module system or a module is missing (EX_UNAVAILABLE). */
const MODULES_UNAVAILABLE = 69;
/** `$0` of the login shell, so `ps` on the login node says what it is. */
const SHELL_NAME = 'kdgat-modules';

/**
 * argv that runs `argv` after the site's modules (the profile's, then the environment's) are loaded
 * in a login shell; `argv` itself when there are none.
 */
export function withModules(site: ModuleSite, argv: readonly string[]): string[] {
  const script = renderModuleShell(
    { name: site.profile ?? 'unnamed', modules: site.modules ?? {} },
    { modules: site.environmentModules ?? [] },
  );
  return script === null ? [...argv] : ['bash', '-l', '-c', script, SHELL_NAME, ...argv];
}

/**
 * Loads the site's modules and looks the frontend up on PATH, changing nothing. Throws with the
 * module system's own message when a module (or `module` itself) is missing, or names the frontend
 * when it is still not found.
 */
export async function checkFrontend(
  ex: Executor,
  env: ModuleSite & { name: string; frontendCommand: string },
): Promise<void> {
  const modules = loginModules({ modules: env.modules ?? {} }, { modules: env.environmentModules ?? [] });
  const own = env.environmentModules ?? [];
  const r = await ex.run(withModules(env, ['sh', '-c', 'command -v "$1"', 'sh', env.frontendCommand]), {
    timeoutSeconds: 120,
  });
  if (r.code === 0 && !r.timedOut) return;
  // Lmod pads its message with blank lines; keep it whole but compact.
  const said = (r.stderr.trim() || r.stdout.trim())
    .replace(/\n\s*\n(\s*\n)+/g, '\n\n')
    .split('\n')
    .slice(-15)
    .join('\n');
  const loaded = modules.length > 0 ? ` after \`module load ${modules.join(' ')}\`` : '';
  if (r.timedOut) {
    throw new Error(
      `environment '${env.name}': loading the modules on ${ex.target} timed out; nothing was changed`,
    );
  }
  if (modules.length > 0 && r.code === MODULES_UNAVAILABLE) {
    throw new Error(
      `environment '${env.name}': the modules of cluster profile ${env.profile ?? ''}` +
        `${own.length > 0 ? ` and of the environment (${own.join(' ')})` : ''} could not be loaded on ${ex.target}; nothing was changed.\n` +
        `${said}\n` +
        (/there is no module command/.test(said)
          ? `Set modules.init in the cluster profile to the site's Lmod init script (now ${env.modules?.init ?? DEFAULT_LMOD_INIT}).`
          : `Check the names in the profile's modules (conda, cuda)${own.length > 0 ? ` and the environment's modules` : ''} with \`module spider NAME\` on the login node.`),
    );
  }
  throw new Error(
    `environment '${env.name}': the frontend command '${env.frontendCommand}' is not on PATH on ${ex.target}${loaded}; nothing was changed.` +
      `${said ? `\n${said}` : ''}\n` +
      `Set build.frontendCommand in the stack config, or the module that provides it (modules.conda in the cluster profile).`,
  );
}
