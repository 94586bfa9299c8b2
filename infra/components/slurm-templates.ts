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
    this.registerOutputs({ dir: this.dir, paths: this.paths });
  }
}
