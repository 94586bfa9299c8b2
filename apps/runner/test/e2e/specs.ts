// Spec texts for the e2e runs, in the ExperimentSpec format of @kdgat/config.
export interface StageSpec {
  id: string;
  stage: string;
  model?: string;
  dependsOn?: string[];
  overrides?: Record<string, string | number | boolean>;
  gpus?: number;
  cpus?: number;
  time?: string;
}

export function specYaml(opts: {
  name: string;
  stages: StageSpec[];
  sweep?: Record<string, (string | number)[]>;
  requeue?: { leadSeconds: number; maxRestarts: number };
  arrayConcurrency?: number;
}): string {
  const lines = [`name: ${opts.name}`, 'cluster: local', 'environment: cpu-local', 'stages:'];
  for (const s of opts.stages) {
    lines.push(
      `  - id: ${s.id}`,
      `    stage: ${s.stage}`,
      `    model: ${s.model ?? 'gat'}`,
      '    scale: small',
      '    dataset: synth',
    );
    if (s.dependsOn?.length) lines.push(`    dependsOn: [${s.dependsOn.join(', ')}]`);
    if (s.overrides) {
      lines.push('    overrides:');
      for (const [k, v] of Object.entries(s.overrides)) lines.push(`      ${k}: ${JSON.stringify(v)}`);
    }
    lines.push(
      '    resources:',
      `      cpus: ${s.cpus ?? 1}`,
      '      memGB: 1',
      `      gpus: { count: ${s.gpus ?? 0} }`,
      `      time: "${s.time ?? '0:10:00'}"`,
      '      partition: gpu',
      ...(opts.arrayConcurrency ? [`      arrayConcurrency: ${opts.arrayConcurrency}`] : []),
    );
  }
  if (opts.sweep) {
    lines.push('sweep:', '  grid:');
    for (const [k, v] of Object.entries(opts.sweep)) lines.push(`    ${k}: ${JSON.stringify(v)}`);
  }
  if (opts.requeue) {
    lines.push(
      'requeue:',
      '  enabled: true',
      '  signal: USR1',
      `  leadSeconds: ${opts.requeue.leadSeconds}`,
      `  maxRestarts: ${opts.requeue.maxRestarts}`,
    );
  }
  return lines.join('\n') + '\n';
}
