/**
 * stage_data.sh (P0): the staging script installed on the cluster and sourced by every job script.
 * The implementation is src/shell/stage-data.sh (see its header for the behaviour and why
 * verification is size + mtime); this puts its two defaults in front of it.
 */
import { requirePositiveInt } from '../quote/validate.ts';
import { assign, shellFileLines } from '../shell/shell-files.ts';

export interface StageDataOptions {
  /** Parallel copies per dataset (HPC_STAGE_JOBS overrides it at run time). Default 4. */
  parallelCopies?: number;
  /** Free space kept on the node-local disk, in MB (HPC_STAGE_RESERVE_MB overrides it). Default 256. */
  reserveMB?: number;
}

export function renderStageData(options: StageDataOptions = {}): string {
  const jobs = requirePositiveInt('stageData.parallelCopies', options.parallelCopies ?? 4);
  const reserveMB = requirePositiveInt('stageData.reserveMB', options.reserveMB ?? 256);
  return [
    '#!/bin/bash',
    '# stage_data.sh (P0): copy dataset caches from scratch to node-local disk before training.',
    '# Rendered by @kdgat/slurm-templates: re-render, do not edit.',
    assign('hpc_stage_default_jobs', jobs),
    assign('hpc_stage_default_reserve_mb', reserveMB),
    '',
    ...shellFileLines('stageData'),
    '',
  ].join('\n');
}
