"""Hyperparameter search: Optuna studies on journal storage, worked by SLURM array tasks."""
