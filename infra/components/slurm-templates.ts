import * as pulumi from '@pulumi/pulumi';
import type { Connection } from '@kdgat/transport';
import { TargetFile } from '../providers/target-file.ts';

export interface SlurmTemplatesArgs {
  /** File name -> script text, as rendered by `renderSiteScripts` of @kdgat/slurm-templates. */
  scripts: Record<string, string>;
  /** Output key -> file name (`SITE_SCRIPT_NAMES`: `stageData` -> `stage_data.sh`); others get a camelCase key. */
  names?: Record<string, string>;
  /** `<projectRoot>/scripts` on the target. */
  dir: string;
  /**
   * The job library (`JOB_LIBRARY` of @kdgat/slurm-templates), installed as `<dir>/lib/<file>`: its
   * file is named by its sha256, and a new version adds a file and keeps the older ones (the jobs
   * rendered for them still run them).
   */
  library?: { file: string; text: string; sha256: string };
  connection: pulumi.Input<Connection>;
}

/** `stage-data.sh` -> `stageData`: the key of a script in the stack outputs when none is given. */
export function scriptKey(fileName: string): string {
  return fileName.replace(/\.[^.]+$/, '').replace(/[-_]+([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** The site's SLURM scripts installed executable; a template change shows as a line diff. */
export class SlurmTemplates extends pulumi.ComponentResource {
  readonly dir: string;
  /** Output key (`stageData`, …) -> installed path. */
  readonly paths: Record<string, string>;
  /** The job library's installed path and sha256 (with `library`). */
  readonly jobLibrary?: { path: string; sha256: string };

  constructor(name: string, args: SlurmTemplatesArgs, opts?: pulumi.ComponentResourceOptions) {
    super('kdgat:hpc:SlurmTemplates', name, {}, opts);
    this.dir = args.dir;
    this.paths = {};
    const keyOf = Object.fromEntries(Object.entries(args.names ?? {}).map(([k, f]) => [f, k]));
    for (const [fileName, content] of Object.entries(args.scripts).sort(([a], [b]) => a.localeCompare(b))) {
      const path = `${args.dir}/${fileName}`;
      new TargetFile(
        `${name}-${fileName}`,
        { connection: args.connection, path, content, mode: '0755' },
        { parent: this },
      );
      this.paths[keyOf[fileName] ?? scriptKey(fileName)] = path;
    }
    if (args.library) {
      const path = `${args.dir}/lib/${args.library.file}`;
      // One resource whatever the version: a new version previews as a replacement with its line
      // diff. Retained on delete, so the replacement keeps the file it replaces (and so does destroy).
      new TargetFile(
        `${name}-job-library`,
        { connection: args.connection, path, content: args.library.text, mode: '0444' },
        { parent: this, retainOnDelete: true },
      );
      this.jobLibrary = { path, sha256: args.library.sha256 };
    }
    this.registerOutputs({ dir: this.dir, paths: this.paths, jobLibrary: this.jobLibrary });
  }
}
