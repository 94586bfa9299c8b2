/** A valid local spec as YAML text, with a hook to change fields. */
export const LOCAL_SPEC = `name: demo
cluster: local
environment: cpu-local
stages:
  - id: train
    stage: curriculum
    model: gat
    scale: small
    dataset: synth
    overrides:
      training.max_epochs: 2
    resources:
      cpus: 2
      memGB: 4
      gpus: { count: 0 }
      time: "0:20:00"
`;

export const PITZER_SPEC = `name: pitzer-demo
cluster: osc-pitzer
environment: gnn-rapids
account: PAS1266
stages:
  - id: ae
    stage: autoencoder
    model: vgae
    scale: large
    dataset: hcrl_sa
    resources:
      cpus: 8
      memGB: 72
      gpus: { count: 1, type: v100 }
      time: "8:00:00"
`;
