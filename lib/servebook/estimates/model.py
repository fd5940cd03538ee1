"""One model per cell over the whole study, its decisions (intersection-union acceptance, Holm rejection) and
the group-sequential levels of adding runs until decided."""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass
from typing import Any, Sequence

# --- One model per cell over the whole study -------------------------------------------------------------
#
# Every candidate of a study measured the same cell on the same host, so the launch-to-launch noise is
# estimated from all of them, not from the two sides of one comparison: log(figure) = candidate + block +
# noise, fitted by least squares, with blocks for the interleaving round (and the machine) where more than
# one candidate shares them. A candidate whose own runs scatter more than the study's is not hidden behind
# the pooled figure: its variance is shrunk toward the pooled one (empirical Bayes), not replaced by it.

ALPHA = 0.05  # one-sided, per decision


@dataclass(frozen=True)
class Contrast:
    """Candidate against baseline on one cell, on the log scale, from the study's model of that cell."""

    log_ratio: float
    se: float | None
    df: int | None
    n_candidate: int
    n_baseline: int
    #: how the variance was estimated, for the reasons ("pooled over 6 candidates, 18 runs, rounds as blocks")
    method: str = ""

    @property
    def pct(self) -> float:
        return 100.0 * (math.exp(self.log_ratio) - 1.0)

    def bounds_pct(self, alpha: float = ALPHA) -> tuple[float, float] | None:
        """The one-sided (1 - alpha) lower and upper bounds of the change in percent (together a 1 - 2 alpha
        two-sided interval); None without a variance."""
        if self.se is None or self.df is None:
            return None
        from scipy import stats

        t = float(stats.t.ppf(1 - alpha, self.df))
        return (100.0 * (math.exp(self.log_ratio - t * self.se) - 1.0),
                100.0 * (math.exp(self.log_ratio + t * self.se) - 1.0))

    def p_beyond(self, log_margin: float, worse_is_lower: bool) -> tuple[float, float] | None:
        """(p that the candidate is within the margin, p that it is beyond it): one-sided p-values of the
        non-inferiority test (H0: beyond) and of the inferiority test (H0: within)."""
        if self.se is None or self.df is None:
            return None
        from scipy import stats

        if self.se == 0:
            within = (self.log_ratio > log_margin) if worse_is_lower else (self.log_ratio < log_margin)
            return (0.0, 1.0) if within else (1.0, 0.0)
        z = (self.log_ratio - log_margin) / self.se
        if not worse_is_lower:
            z = -z
        # z > 0: on the good side of the margin.
        return float(stats.t.sf(z, self.df)), float(stats.t.cdf(z, self.df))


Block = tuple[str, ...]


def fit_contrasts(groups: dict[str, list[tuple[Block, float]]], baseline: str) -> dict[str, Contrast]:
    """Each group's contrast with `baseline` from one least-squares fit of log(value) ~ group + block over all
    groups. `groups`: name -> (block, value) per run, a block being e.g. (machine, round)."""
    import numpy as np

    rows = [(name, block, math.log(v)) for name, runs in groups.items() for block, v in runs
            if v is not None and v == v and v > 0]
    rows, unpaired = _paired_rows(rows)
    names = sorted({name for name, _, _ in rows})
    if baseline not in names:
        return {}
    # Each position of a block is its own factor (the machine, the round), entered additively: a machine
    # effect is estimated from every candidate that ran there, whichever rounds they ran in.
    factors = _shared_levels(rows)
    columns = [(position, level) for position, levels in enumerate(factors) for level in levels[1:]]
    width = len(names) + len(columns)
    x = np.zeros((len(rows), width))
    for i, (name, block, _) in enumerate(rows):
        x[i, names.index(name)] = 1.0
        for j, (position, level) in enumerate(columns):
            if position < len(block) and block[position] == level:
                x[i, len(names) + j] = 1.0
    y = np.array([value for _, _, value in rows])
    kept = _independent_columns(x, len(names))
    x, columns = x[:, kept], [columns[j - len(names)] for j in kept[len(names):]]
    width = x.shape[1]
    # fewer block positions than words where no run was seated in a round
    described = [f"{len(levels)} {word}" for levels, word in zip(factors, _FACTOR_WORDS, strict=False) if levels] \
        if columns else []
    df = len(rows) - width
    counts = {name: sum(1 for n, _, _ in rows if n == name) for name in names}
    method = (f"variance pooled over {len(names)} candidates and {len(rows)} runs, moderated per candidate"
              + (f", blocks: {' and '.join(described)}" if described else "")
              + (f"; {unpaired} runs left out, on machines no other candidate ran on" if unpaired else ""))
    variances, beta, covariance = _iterated_fit(x, y, rows, names, df)
    out = {}
    b = names.index(baseline)
    for name in names:
        if name == baseline:
            continue
        i = names.index(name)
        se = math.sqrt(max(float(covariance[i, i] + covariance[b, b] - 2 * covariance[i, b]), 0.0)) \
            if variances is not None else None
        out[name] = Contrast(float(beta[i] - beta[b]), se, df if se is not None else None, counts[name],
                             counts[baseline], method)
    return out


def _iterated_fit(x: Any, y: Any, rows: list[tuple[str, Block, float]], names: list[str],
                  df: int) -> tuple[dict[str, float] | None, Any, Any]:
    """Feasible weighted least squares run to convergence: (each group's variance or None, beta, covariance).
    A noisy candidate's runs weigh less in the block effects; stopping after one or two steps (as this once did)
    left an erratic candidate's residuals in the blocks, and so in every other candidate's variance: beside one
    30%-CV candidate, everyone's intervals came out several times wider than their own runs justify."""
    import numpy as np

    weights = np.ones(len(rows))
    beta, covariance = _weighted_fit(x, y, weights)
    scales = None
    for _ in range(100):
        leverage = np.einsum("ij,jk,ik->i", x, covariance, x) * weights
        scales = _moderated_variances(y - x @ beta, leverage, rows, names, df)
        if scales is None:
            break
        weights = np.array([1.0 / max(scales[name], 1e-18) for name, _, _ in rows])
        previous, (beta, covariance) = beta, _weighted_fit(x, y, weights)
        if float(np.max(np.abs(beta - previous))) < 1e-9:
            break
    return scales, beta, covariance


def _independent_columns(x: Any, groups: int) -> list[int]:
    """The group columns and each block column that adds to the rank of those before it. Rounds are nested in
    machines (a round runs on one machine), so with several machines some block columns are sums of others: those
    are dropped, not every block (dropping all of them once compared a fast host's runs with a slow one's). A block
    column that would make a group's column a sum of blocks (a round that only one group ran in) goes too."""
    import numpy as np

    kept = list(range(groups))
    for j in range(groups, x.shape[1]):
        if np.linalg.matrix_rank(x[:, kept + [j]]) > len(kept):
            kept.append(j)
    return kept


def _weighted_fit(x: Any, y: Any, weights: Any) -> tuple[Any, Any]:
    """Weighted least squares: the coefficients and their covariance, weights being inverse variances."""
    import numpy as np

    xw = x * weights[:, None]
    covariance = np.linalg.pinv(x.T @ xw)
    return covariance @ (xw.T @ y), covariance


_FACTOR_WORDS = ("machines", "interleaving rounds")


def _paired_rows(rows: list[tuple[str, Block, float]]) -> tuple[list[tuple[str, Block, float]], int]:
    """The runs that can be compared: where runs come from several machines (or GPU groups), a machine on which
    only one candidate ran cannot be told apart from that candidate, so its runs leave (and are counted)."""
    on: dict[str, set[str]] = {}
    for name, block, _ in rows:
        if block:
            on.setdefault(block[0], set()).add(name)
    if len(on) < 2:
        return rows, 0
    alone = {machine for machine, names in on.items() if len(names) < 2}
    kept = [row for row in rows if not (row[1] and row[1][0] in alone)]
    return kept, len(rows) - len(kept)


def _shared_levels(rows: list[tuple[str, Block, float]]) -> list[list[str]]:
    """Per block position (machine, round): the levels that hold runs of more than one group, when there are at
    least two of them (a level of one group says nothing about noise; one level is no factor)."""
    width = max((len(block) for _, block, _ in rows), default=0)
    out = []
    for position in range(width):
        members: dict[str, set[str]] = {}
        for name, block, _ in rows:
            if position < len(block):
                members.setdefault(block[position], set()).add(name)
        shared = sorted(level for level, names in members.items() if len(names) > 1)
        out.append(shared if len(shared) > 1 else [])
    return out


def _chi2_median(df: float) -> float:
    """The chi-square's median at `df` degrees of freedom, as scipy.stats.chi2 computes it (its ppf is this very
    expression) without the distribution's argument checks: a fifth of a millisecond a call, and a study's side
    effects fit the model thousands of times over fractional degrees of freedom."""
    from scipy import special

    return float(2 * special.gammaincinv(df / 2, 0.5))


def _moderated_variances(residuals: Any, leverage: Any, rows: list[tuple[str, Block, float]], names: list[str],
                         df: int) -> dict[str, float] | None:
    """Each group's variance, shrunk toward the study's (empirical Bayes): the prior is a robust scale of all groups'
    variances (their median, corrected for the chi-square's skew), so one noisy candidate widens its own
    interval without widening everyone else's; the prior weighs as much as the rest of the study's residual df.
    A group's own degrees of freedom are its runs' share of the residual df, sum(1 - leverage): the block
    effects are fitted from its runs too, so its residuals are smaller than its noise by that share (counting
    n - 1 for each group made every variance too small once blocks were in the model)."""

    if df <= 0:
        return None
    own: dict[str, tuple[float, float]] = {}
    for name in names:
        mine = [(float(r), float(h)) for r, h, (n, _, _) in zip(residuals, leverage, rows, strict=True) if n == name]
        own[name] = (sum(r * r for r, _ in mine), max(sum(1.0 - h for _, h in mine), 0.0))
    spread = [ss / d / (_chi2_median(d) / d) for ss, d in own.values() if d > 1e-6]
    if not spread:
        total = sum(ss for ss, _ in own.values())
        return {name: total / df for name in names}
    prior = float(statistics.median(spread))
    out = {}
    for name, (ss, d) in own.items():
        prior_df = max(df - d, 1)
        out[name] = (prior_df * prior + ss) / (prior_df + d)
    return out


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Which hypotheses Holm's step-down procedure rejects at familywise level `alpha`."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (len(p_values) - rank):
            break
        rejected[i] = True
    return rejected


def spent_alpha(look: int, looks: int, alpha: float = ALPHA, first_runs: int | None = None) -> float:
    """The nominal one-sided level of a decision at look `look` (1-based) of a planned `looks`, a look being one
    more run per side, starting from `first_runs` (default: as many runs as there are looks after the first).

    Group-sequential boundaries (Lan-DeMets): an O'Brien-Fleming-type spending function gives each look its share
    of `alpha` by its information fraction (runs / most runs), and the boundaries account for the correlation
    between looks (the same runs, plus one), so together the looks spend exactly `alpha`: early looks with few
    runs spend little, the last keeps most of it."""
    if looks <= 1:
        return alpha
    look = min(max(look, 1), looks)
    first = first_runs if first_runs is not None else looks - 1
    return _nominal_levels(looks, first, round(alpha, 6))[look - 1]


@functools.lru_cache(maxsize=64)
def _nominal_levels(looks: int, first: int, alpha: float) -> tuple[float, ...]:
    import numpy as np
    from scipy import optimize, stats

    runs = [first + k for k in range(looks)]
    fractions = [n / runs[-1] for n in runs]
    z_alpha = stats.norm.ppf(1 - alpha / 2)
    spent = [2 * (1 - stats.norm.cdf(z_alpha / math.sqrt(t))) for t in fractions]
    spent[-1] = alpha
    # Z_k of looks j < k correlate as sqrt(n_j / n_k): later looks reuse every earlier run.
    corr = np.array([[math.sqrt(min(a, b) / max(a, b)) for b in runs] for a in runs])
    bounds: list[float] = []
    for k in range(looks):
        target = 1 - spent[k]  # P(no earlier look and not this one crossed)
        if k == 0:
            bounds.append(float(stats.norm.ppf(target)))
            continue
        mvn = stats.multivariate_normal(mean=np.zeros(k + 1), cov=corr[:k + 1, :k + 1])

        def stay(c: float, k: int = k, mvn: Any = mvn, target: float = target) -> float:
            return float(mvn.cdf(np.array(bounds + [c]))) - target

        bounds.append(float(optimize.brentq(stay, -1.0, 10.0, xtol=1e-5)))
    return tuple(float(1 - stats.norm.cdf(c)) for c in bounds)
