"""KD-GAT training pipeline."""
