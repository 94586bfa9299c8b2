"""Experiment tracking of the training stages: TensorBoard event files always, MLflow and W&B when
the config (``tracking.*``) or the job's variables ask, with one identity across requeues.

- :mod:`~kdgat.tracking.settings`: what is tracked where, and the rule for stores on shared
  filesystems (no SQLite over NFS, Lustre or GPFS);
- :mod:`~kdgat.tracking.session`: a stage's tracking (``stage_tracking`` around a stage,
  ``TrackingCallback`` in each fit attempt, ``in_trial`` for a study's trials);
- :mod:`~kdgat.tracking.identity`: the run ids kept beside ``checkpoints/last.ckpt``, the parent
  of a sweep's or a study's runs made once;
- :mod:`~kdgat.tracking.context`: tags from SLURM and the runner's ``manifest.json``;
- :mod:`~kdgat.tracking.backends`: TensorBoard, MLflow and W&B behind one small interface;
- :mod:`~kdgat.tracking.sync`: ``python -m kdgat tracking-sync`` uploads offline W&B runs.

Nothing here imports TensorBoard, MLflow or W&B until a stage trains with them.
"""
