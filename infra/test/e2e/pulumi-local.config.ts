// Stack config of the e2e `local` site (shared with bench/pulumi-preview).
import { join } from 'node:path';

/** Stack config of a `local` site under `root`, with a venv of the given requirement lines. */
export function localConfig(root: string, wheels: string, pip: string[], datasets = ['hcrl_sa', 'set_01']) {
  return {
    cluster: 'local',
    clusterOverrides: {
      paths: {
        projectRoot: join(root, 'project'),
        scratchRoot: join(root, 'scratch'),
        homeCacheRoot: join(root, 'home-cache'),
        logsDir: join(root, 'scratch', 'logs'),
      },
    },
    environment: 'cpu-local',
    // A venv of its own from a local wheelhouse, not layered over python/.venv: without the
    // pipeline's pins (they are not in the wheelhouse), only the test's requirement lines.
    environmentOverrides: { name: 'cpu-e2e', pipelinePins: false, requirements: pip },
    datasets,
    build: {
      frontend: 'pip',
      frontendCommand: 'python3',
      pipOptions: ['--no-index', '--find-links', wheels],
    },
  };
}
