// Stack config of the e2e `local` site (shared with bench/pulumi-preview).
import { join } from 'node:path';

/** One more venv of a `local` site: its name and requirement lines (from the same wheelhouse). */
export interface ExtraEnvironment {
  name: string;
  pip: string[];
  kernel?: { displayName: string };
}

/**
 * Stack config of a `local` site under `root`, with a venv of the given requirement lines (and any
 * further venvs: a stack of several environments). Kernels go to `<root>/kernels`.
 */
export function localConfig(
  root: string,
  wheels: string,
  pip: string[],
  datasets = ['hcrl_sa', 'set_01'],
  extra: ExtraEnvironment[] = [],
) {
  // A venv of its own from a local wheelhouse, not layered over python/.venv: without the
  // pipeline's pins (they are not in the wheelhouse), only the test's requirement lines.
  const venv = (name: string, lines: string[], kernel?: { displayName: string }) => ({
    preset: 'cpu-local',
    name,
    pipelinePins: false,
    requirements: lines,
    ...(kernel ? { kernel } : {}),
  });
  return {
    cluster: 'local',
    clusterOverrides: {
      paths: {
        projectRoot: join(root, 'project'),
        scratchRoot: join(root, 'scratch'),
        homeCacheRoot: join(root, 'home-cache'),
        logsDir: join(root, 'scratch', 'logs'),
        kernelsDir: join(root, 'kernels'),
      },
    },
    environments: [venv('cpu-e2e', pip), ...extra.map((e) => venv(e.name, e.pip, e.kernel))],
    datasets,
    build: {
      frontend: 'pip',
      frontendCommand: 'python3',
      pipOptions: ['--no-index', '--find-links', wheels],
    },
  };
}
