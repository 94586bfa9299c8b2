// The default pipeline's Python package (python/src/kdgat), as the rest of the tool reaches it. The
// one place outside that package that names it: everything else reads these (a test checks it).
//
// The package also carries the tool's own site helpers, which run on a run's files wherever they
// lie (on a site over SSH, on the laptop): the catalogue's rows and the `runs` table, the report's
// drawing, the tune workers and their report, the tracking sync. Every environment infra builds for
// a stack holds the package, so those helpers run there whatever pipeline a run declared.

/** The default pipeline's name in a spec's `pipeline:` (and its declaration's `name`). */
export const DEFAULT_PIPELINE_NAME = 'kdgat';

/** `python -m <this> …`: the default pipeline's CLI and the tool's site helpers. */
export const SITE_HELPER_MODULE = 'kdgat';

/** The uv.lock project whose runtime dependencies an environment pins by default. */
export const DEFAULT_LOCK_PROJECT = 'kdgat';

/** The run contract the job scripts, the runner and the package share, shipped inside the package. */
export const RUN_CONTRACT_FILE = new URL('../../../../python/src/kdgat/contract/run_contract.json', import.meta.url);

/** The environment variable the default pipeline reads the staged caches' root from. */
export const DEFAULT_CACHE_ROOT_VARIABLE = 'KD_GAT_CACHE_ROOT';

/** The environment variable the default pipeline reads its raw recordings' root from (`<root>/<dataset>`). */
export const DEFAULT_DATA_ROOT_VARIABLE = 'KD_GAT_DATA_ROOT';
