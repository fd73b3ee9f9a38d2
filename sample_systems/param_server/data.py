"""The synthetic data set and the model maths, shared by server and workers.

Everything is seeded, so every process builds the same data set and every run
prints the same losses.
"""

from __future__ import annotations

import numpy as np

SEED = 1234
SAMPLES = 600
FEATURES = 6


def make_dataset(seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """A linearly separable-ish binary classification problem with label noise."""
    rng = np.random.default_rng(seed)
    true_weights = rng.normal(size=FEATURES)
    features = rng.normal(size=(SAMPLES, FEATURES))
    logits = features @ true_weights + rng.normal(scale=0.5, size=SAMPLES)
    labels = (logits > 0).astype(np.float64)
    return features, labels


def predict(weights: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Logistic regression: the probability of label 1."""
    return 1.0 / (1.0 + np.exp(-(features @ weights)))


def cross_entropy(weights: np.ndarray, features: np.ndarray, labels: np.ndarray) -> float:
    """Mean binary cross-entropy of `weights` on a data set."""
    probabilities = np.clip(predict(weights, features), 1e-12, 1 - 1e-12)
    losses = labels * np.log(probabilities) + (1 - labels) * np.log(1 - probabilities)
    return float(-losses.mean())
