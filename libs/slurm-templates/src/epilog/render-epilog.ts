/**
 * job_epilog.sh (P5): the report every job prints at its end (run by the job script's EXIT trap).
 * The implementation is src/shell/epilog.sh; this puts the profile's values in front of it: the
 * cluster name and the post-job hint (`{cluster}`, `{jobid}` are replaced at run time, as text: the
 * hint is printed, never run).
 */
import type { ProfileView } from '../inputs.ts';
import { shq } from '../quote/shq.ts';
import { assign, shellFileLines } from '../shell/shell-files.ts';

export function renderEpilog(profile: Pick<ProfileView, 'name' | 'clusterName' | 'postJobHint'>): string {
  return [
    '#!/bin/bash',
    '# job_epilog.sh (P5): what a finished job used, printed at the end of its log.',
    `# Rendered by @kdgat/slurm-templates for cluster profile ${shq(profile.name)}: re-render, do not edit.`,
    assign('hpc_cluster', profile.clusterName),
    assign('hpc_post_job_hint', profile.postJobHint ?? ''),
    '',
    ...shellFileLines('epilog'),
    '',
  ].join('\n');
}
