"""Which configuration to launch next: a Gaussian process over the search space (scikit-learn) and expected
improvement, evaluated on every configuration not yet launched (the space is finite, so no optimiser is needed).

Why a model and not successive halving: halving screens every configuration at its cheapest rung, and an engine
launch is the expensive unit (a large model loads for minutes), so a space of 100 configurations would spend
100 launches before it halved anything. A model shares what one launch taught across its neighbours. The
objective is modelled on the log scale (effects are relative), with a white-noise term for launch-to-launch
spread, which the GP fits along with its length scales.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Prediction:
    mean: np.ndarray  # log of the objective, oriented so that higher is better
    sd: np.ndarray
    kernel: Any = None  # the fitted kernel, reused while a batch is picked


def space_filling(features: Sequence[Sequence[float]], count: int, seed: int, taken: Sequence[int] = ()) -> list[int]:
    """`count` indices spread over the space (greedy farthest point from a seeded start, or from those `taken`)."""
    points = np.asarray(features, dtype=float)
    chosen = list(taken)
    if not chosen:
        chosen.append(int(np.random.default_rng(seed).integers(len(points))))
        count -= 1
    distance = np.min([np.sum((points - points[i]) ** 2, axis=1) for i in chosen], axis=0)
    picked: list[int] = [] if taken else [chosen[0]]
    for _ in range(max(0, count)):
        if not np.any(distance > 0):
            break
        nxt = int(np.argmax(distance))
        picked.append(nxt)
        distance = np.minimum(distance, np.sum((points - points[nxt]) ** 2, axis=1))
    return picked


def fit_predict(features: Sequence[Sequence[float]], observed: dict[int, float], seed: int,
                kernel: Any = None) -> Prediction:
    """The GP posterior at every configuration, from (index -> log objective, higher better) observations; with
    `kernel` (an earlier fit's), its hyperparameters are kept instead of fitted again."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    points = np.asarray(features, dtype=float)
    index = sorted(observed)
    y = np.array([observed[i] for i in index])
    fixed = kernel is not None
    kernel = kernel or (ConstantKernel(1.0, (1e-3, 1e3)) * Matern(length_scale=np.full(points.shape[1], 0.5),
                                                                  length_scale_bounds=(0.05, 20.0), nu=2.5)
                        + WhiteKernel(0.05, (1e-6, 1.0)))
    gp = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=1, random_state=seed,
                                  optimizer=None if fixed else "fmin_l_bfgs_b")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(points[index], y)
    mean, sd = gp.predict(points, return_std=True)
    return Prediction(np.asarray(mean), np.asarray(sd), gp.kernel_)


def expected_improvement(prediction: Prediction, incumbent: float, xi: float = 0.005) -> np.ndarray:
    """E[max(0, f - incumbent - xi)] under the posterior; `xi` (0.5% on the log scale) keeps the search from
    spending launches on configurations the model already thinks are ties."""
    from scipy.stats import norm

    sd = np.maximum(prediction.sd, 1e-12)
    z = (prediction.mean - incumbent - xi) / sd
    return (prediction.mean - incumbent - xi) * norm.cdf(z) + sd * norm.pdf(z)


def next_batch(features: Sequence[Sequence[float]], observed: dict[int, float], candidates: Sequence[int],
               count: int, seed: int) -> list[tuple[int, float, float, float]]:
    """Up to `count` configurations to launch next, as (index, expected improvement, predicted mean, sd): each
    pick is believed at its predicted mean while the next is chosen (the "kriging believer"), so a batch for
    parallel lanes spreads out instead of repeating one region."""
    believed = dict(observed)
    left = [i for i in candidates if i not in observed]
    picks: list[tuple[int, float, float, float]] = []
    kernel = None
    for _ in range(min(count, len(left))):
        prediction = fit_predict(features, believed, seed, kernel)
        kernel = prediction.kernel
        incumbent = max(float(prediction.mean[i]) for i in believed)
        gain = expected_improvement(prediction, incumbent)
        best = max(left, key=lambda i: (gain[i], prediction.mean[i]))
        picks.append((best, float(gain[best]), float(prediction.mean[best]), float(prediction.sd[best])))
        believed[best] = float(prediction.mean[best])
        left.remove(best)
    return picks


def oriented(value: float, lower_is_better: bool) -> float:
    """The log objective, oriented so that higher is better."""
    return -math.log(value) if lower_is_better else math.log(value)
