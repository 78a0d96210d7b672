"""Where a search's proposals come from: Optuna's TPE, made to propose alike on every host,
or a search's own record.

Optuna's TPE sampler (pinned) is deterministic for a seed on one machine, but two of its
steps depend on how numpy was built and which SIMD code it dispatches to on the CPU at hand:

* its Parzen estimator gives each observation of a numeric variable a bandwidth from its
  neighbours in sorted order, sorting with numpy's default ``argsort``, which is not stable.
  Where observations share a value (the ordinal indices of a grid nearly always do), which of
  them gets which bandwidth depends on the sort's algorithm, and numpy picks that algorithm
  by the CPU: AVX-512, AVX2 and plain x86-64 hosts order ties differently;
* the candidates' acquisition values come from vectorised ``exp`` and ``log`` whose last bits
  differ between those code paths, so two candidates of equal value can swap places.

Either is enough for a replay of a few hundred runs to ask for other runs on another host
(seen: an AVX-512 host against the AVX2 host that derived the committed replays). So the
sampler here (search versions 2 and later) sorts stably, which has one answer whatever the
algorithm, and compares acquisition values rounded to :data:`ACQUISITION_DECIMALS` decimal
places, the first candidate drawn winning among equals. Rounding leaves a residue: two
values that straddle a rounding boundary by less than their last-bit difference; for values
of order one that is about one comparison in 10^7.

Version 1 of the ``adaptive`` and ``tpe`` strategies used Optuna's sampler as it is. A search
made with it is not re-run: its proposals are read back from its record in the campaign log
(:class:`Recorded`), and only a search that ended can be read so.

Responsible for: proposing configurations (as keys of a :class:`~iolab.core.search.strategies.
Space`) and being told their values. Not responsible for: what is measured, or when a
search stops (``iolab.core.search.strategies``).
"""

from __future__ import annotations

import contextlib
import types
import warnings
from typing import Any, Iterator

ACQUISITION_DECIMALS = 9   # the precision at which candidates' acquisition values compare


class RecordEnded(Exception):
    """A search read from its record asked for a proposal beyond it."""


def _distributions(variables: dict[str, list[Any]]) -> dict[str, Any]:
    """Numeric variables as ordinal indices (TPE then models their order), others as
    categories."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    out = {}
    for var, values in variables.items():
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        out[var] = (IntDistribution(0, len(values) - 1) if numeric and len(values) > 1
                    else CategoricalDistribution(list(range(len(values)))))
    return out


@contextlib.contextmanager
def _stable_argsort(module: types.ModuleType) -> Iterator[None]:
    """Within the block, ``module``'s numpy sorts its argsorts stably (the only change)."""
    import numpy as np

    class StableNumpy(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            return getattr(np, name)

        @staticmethod
        def argsort(a: Any, axis: int = -1, kind: str | None = None, order: Any = None) -> Any:
            return np.argsort(a, axis=axis, kind="stable", order=order)

    saved = module.np
    module.np = StableNumpy("numpy")
    try:
        yield
    finally:
        module.np = saved


def _host_independent_tpe(**options: Any):
    """Optuna's TPESampler with the stable sort and the rounded comparison (module docstring)."""
    import numpy as np
    from optuna.samplers import TPESampler
    from optuna.samplers._tpe import parzen_estimator

    class StableParzenEstimator(parzen_estimator._ParzenEstimator):
        def _calculate_numerical_distributions(self, *args: Any, **kwargs: Any) -> Any:
            with _stable_argsort(parzen_estimator):
                return super()._calculate_numerical_distributions(*args, **kwargs)

    class HostIndependentTPE(TPESampler):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            # Optuna's documented place to customize the estimator
            self._parzen_estimator_cls = StableParzenEstimator

        def _compute_acquisition_func(self, *args: Any, **kwargs: Any) -> Any:
            # TPESampler._compare takes the first of equal maxima: equal at the stated
            # precision, the first candidate drawn wins on every host
            values = super()._compute_acquisition_func(*args, **kwargs)
            return np.round(values, ACQUISITION_DECIMALS)

    return HostIndependentTPE(**options)


class Sampler:
    """Proposals of Optuna's TPE over a space's varied values (seeded; host-independent)."""

    def __init__(self, variables: dict[str, list[Any]], key_of, seed: int,
                 multivariate: bool, startup: int | None = None):
        import optuna  # only where a sampler runs: its import takes a second

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        options: dict[str, Any] = {"seed": seed}
        if multivariate:
            options.update(multivariate=True)
        if startup is not None:
            options.update(n_startup_trials=startup)
        with warnings.catch_warnings():  # multivariate TPE is marked experimental
            warnings.simplefilter("ignore")
            sampler = _host_independent_tpe(**options)
        self.study = optuna.create_study(direction="maximize", sampler=sampler)
        self.variables = variables
        self.key_of = key_of
        self.dists = _distributions(variables)
        self.index = {var: {v: i for i, v in enumerate(vals)} for var, vals in variables.items()}
        self.trial = None

    def insist(self, params: dict[str, Any]) -> None:
        """The configuration with these varied values is the next proposal."""
        self.study.enqueue_trial({var: self.index[var][params[var]] for var in self.variables})

    def insist_indices(self, indices: dict[str, int]) -> None:
        """The configuration with these indices into the varied values is the next proposal."""
        self.study.enqueue_trial(indices)

    def propose(self) -> str | None:
        """The next configuration's key (None: one the space has not got)."""
        self.trial = self.study.ask(self.dists)
        return self.key_of({var: self.variables[var][self.trial.params[var]]
                            for var in self.variables})

    def tell(self, value: float | None) -> None:
        """The last proposal's value (None: it could not be run)."""
        from optuna.trial import TrialState

        if value is None:
            self.study.tell(self.trial, state=TrialState.FAIL)
        else:
            self.study.tell(self.trial, value)


class Recorded:
    """A version-1 search's proposals as its campaign log recorded them, in order: each new
    configuration the sampler proposed (proposals of known configurations were told without a
    run and left nothing to replay)."""

    def __init__(self, keys: list[str]):
        self.keys = list(keys)
        self.next = 0

    def insist(self, params: dict[str, Any]) -> None:
        """The recorded proposals already include the strategy's own first choices."""

    def insist_indices(self, indices: dict[str, int]) -> None:
        """As :meth:`insist`."""

    def propose(self) -> str:
        if self.next >= len(self.keys):
            raise RecordEnded(f"the record holds {len(self.keys)} proposals")
        self.next += 1
        return self.keys[self.next - 1]

    def tell(self, value: float | None) -> None:
        """A recorded search learns nothing: its proposals are fixed."""
