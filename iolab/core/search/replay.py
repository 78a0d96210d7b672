"""Replaying search strategies offline against a full grid's stored runs.

A full grid measured every configuration of a space under the repetition rule; its best set
(and the tie-break's answer in it) is the truth. A replay runs a strategy from a seed against
:class:`~iolab.core.search.oracle.ReplayOracle`, which answers each run the strategy asks for
with one of that configuration's stored repetitions, in an order drawn with the same seed, and
refuses any run the grid did not make. Over many seeds, each strategy at each budget gives the
runs it used and whether its answer lies in the grid's best set (and whether it is the grid's
own answer). :func:`summary` states the share found with a 95 % Wilson interval.

Replays of Optuna's samplers take seconds each, so the comparison is derived once by
``iolab search-replay`` into ``data/derived/search_replay/<experiment>/<environment>.csv``
with a YAML beside it naming how (strategies and versions, seeds, budgets) and from what (the
digest of the grid's stored values); the chapter reads it and checks the digest, and
``tests/test_rederive.py`` derives a few seeds of it again, with and without numpy's AVX-512
code, byte for byte. The derived files are replaced whole, never written in place: a link or
a FIFO at their names is refused (:func:`iolab.safefiles.replace_output`). They are read back
the same way (:func:`read`): as regular files of a bounded size, never through a link, and
every field the chapter uses checked.

Responsible for: the grid's samples and truth, the replays, their summary and the derived
file. Not responsible for: the strategies (``iolab.core.search.strategies``).
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from iolab.core.identity import canonical_json
from iolab.core.repetitions import Rule
from iolab.core.search.answer import Answer, answer
from iolab.core.search.oracle import ReplayOracle
from iolab.core.search.params import Objective
from iolab.core.search.strategies import VERSIONS, Space, search
from iolab.errors import InputError, excerpt
from iolab.safefiles import NotOurs, check_output, read_regular, replace_output
from iolab.yamlfile import read_file

OUTPUT = "iolab search-replay"  # who writes the derived file, for a refusal
INFO_MOST = 1 << 20  # bytes of the YAML beside the replays: iolab writes about 500
# bytes of the replays: 100 seeds make 232 kB (about 200 bytes a row), search-replay's most
# seeds (100,000) about 240 MB
REPLAYS_MOST = 1 << 30
ROLE = "search replays derived by 'iolab search-replay'"
COMPARED = ("random", "tpe", "adaptive")
BUDGET_SHARES = (0.05, 0.10, 0.20, 0.40)   # of the grid's runs
COLUMNS = ["strategy", "version", "budget", "budget_share", "seed", "runs_used",
           "configurations", "answer", "in_best_set", "is_grid_answer"]


@dataclass
class Grid:
    """A full grid's stored runs as a search space: its configurations' samples and truth."""

    space: Space
    samples: dict[str, list[float]]
    rule: Rule
    objective: Objective
    truth: Answer

    @property
    def runs(self) -> int:
        return sum(len(v) for v in self.samples.values())

    def digest(self) -> str:
        """What the replays were derived from: every configuration's stored values."""
        text = canonical_json({k: [round(v, 6) for v in vals]
                               for k, vals in sorted(self.samples.items())})
        return hashlib.sha256(text.encode()).hexdigest()


def grid_of(plan: Any) -> Grid:
    """The searched grid of a plan whose params sweep it (``search: {strategy: grid}``):
    every configuration with stored runs and their values of the objective's metric."""
    spec = plan.spec
    if spec.search is None or spec.search.adaptive:
        raise InputError(spec.params_file, "search", "a replay needs a full grid: params "
                         "that name the searched grid with strategy grid",
                         allowed="search: {grid: NAME, strategy: grid, objective: {...}}")
    name = spec.search.grid
    varied = spec.grids[name]["vary"]
    samples, params = {}, {}
    for point in plan.points():
        if name not in point.grids or point.confirm or point.excluded_by:
            continue
        values = [v for _, v in sorted(point.samples.items())
                  if v is not None and not math.isnan(v)]
        if values:
            key = canonical_json(point.params)
            samples[key], params[key] = values, point.params
    if not samples:
        raise InputError(spec.params_file, f"grids.{name}", "has no stored runs to replay",
                         allowed="a grid measured with 'iolab run'")
    truth = answer(dict(samples), params, spec.search.objective)
    return Grid(Space(varied, params), samples, spec.rule, spec.search.objective, truth)


def replay(grid: Grid, strategy: str, budget: int | None, seed: int) -> dict[str, Any]:
    """One replay: the strategy from ``seed`` against the grid's runs drawn with ``seed``."""
    out = search(strategy, grid.space, grid.rule, budget, ReplayOracle(grid.samples, seed),
                 grid.objective, seed)
    key = out.answer.key if out.answer is not None else None
    return {"strategy": strategy, "version": out.version, "budget": budget, "seed": seed,
            "runs_used": out.used, "configurations": len(out.values), "answer": key,
            "in_best_set": key in grid.truth.members, "is_grid_answer": key == grid.truth.key}


def budgets(grid: Grid, shares: Iterable[float] = BUDGET_SHARES) -> dict[float, int]:
    return {share: max(grid.rule.max, math.floor(share * grid.runs)) for share in shares}


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of a proportion k/n."""
    from scipy.stats import norm

    if n == 0:
        return math.nan, math.nan
    z = norm.ppf(0.5 + confidence / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # at k = 0 (k = n) the bound is exactly 0 (1); rounding must not move it
    return (0.0 if k == 0 else max(0.0, centre - half)), (1.0 if k == n else min(1.0, centre + half))


def summary(rows, grid_runs: int):
    """Per strategy and budget: replays, runs used (mean and most), the share of the grid's
    runs that is, and the share of answers in the grid's best set with its 95 % Wilson
    interval (and the share equal to the grid's own answer, with its interval)."""
    import pandas as pd

    out = []
    for (strategy, share), part in rows.groupby(["strategy", "budget_share"], sort=False):
        k, n = int(part["in_best_set"].sum()), len(part)
        low, high = wilson(k, n)
        own_low, own_high = wilson(int(part["is_grid_answer"].sum()), n)
        out.append({"strategy": strategy, "budget": int(part["budget"].iloc[0]),
                    "budget_share": share, "replays": n,
                    "runs_mean": part["runs_used"].mean(), "runs_most": int(part["runs_used"].max()),
                    "runs_share": part["runs_used"].mean() / grid_runs,
                    "found": k / n, "found_low": low, "found_high": high,
                    "grid_answer": part["is_grid_answer"].mean(),
                    "grid_answer_low": own_low, "grid_answer_high": own_high})
    return pd.DataFrame(out)


def derived_path(data_dir: Path, experiment: str, environment: str) -> Path:
    return Path(data_dir) / "derived" / "search_replay" / experiment / f"{environment}.csv"


def meta(grid: Grid, seeds: list[int], shares: Iterable[float], strategies: Iterable[str],
         experiment: str, environment: str) -> dict[str, Any]:
    return {"what": "replays of search strategies against the stored full grid "
                    f"{experiment}/{environment} (iolab.core.search.replay)",
            "command": f"iolab search-replay {experiment} --env {environment} "
                       f"--seeds {len(seeds)}",
            "grid_digest": grid.digest(), "grid_runs": grid.runs,
            "grid_configurations": len(grid.samples),
            "strategies": {s: VERSIONS[s] for s in strategies},
            "seeds": [min(seeds), max(seeds)], "budget_shares": list(shares),
            "budgets": {str(k): v for k, v in budgets(grid, shares).items()}}


def _replay_job(job: tuple) -> dict[str, Any]:
    grid, strategy, share, budget, seed = job
    return {**replay(grid, strategy, budget, seed), "budget_share": share}


def derive(grid: Grid, seeds: Iterable[int], strategies: Iterable[str] = COMPARED,
           shares: Iterable[float] = BUDGET_SHARES, jobs: int = 1, progress: bool = False):
    """Every strategy at every budget over every seed, as a table (:data:`COLUMNS`), spread
    over ``jobs`` processes (the rows in the same order)."""
    import pandas as pd
    from tqdm import tqdm

    from iolab import workers

    work = [(grid, s, share, b, seed) for s in strategies
            for share, b in budgets(grid, shares).items() for seed in seeds]
    if jobs <= 1:
        rows = [_replay_job(w) for w in tqdm(work, disable=not progress, unit="replay")]
    else:
        with workers.pool(jobs) as pool:  # Ctrl-C ends it, quietly (iolab.workers)
            rows = list(tqdm(pool.map(_replay_job, work, chunksize=4), total=len(work),
                             disable=not progress, unit="replay"))
    return pd.DataFrame(rows, columns=COLUMNS)


def _no_linked_folder(path: Path) -> None:
    """NotOurs when a folder between the data directory's ``derived`` and ``path`` is a
    symbolic link: the files are the data directory's, and a link would put them elsewhere
    while the command says it wrote them here."""
    parents = list(Path(path).parents)
    names = [p.name for p in parents]
    # only iolab's own folders: a link above the data directory is the user's to have
    for folder in parents[:names.index("derived") + 1] if "derived" in names else []:
        if folder.is_symlink():
            raise NotOurs(folder, None, "is a symbolic link, where iolab keeps derived files; "
                          "it is never followed", allowed="a folder, or nothing (iolab then "
                          "makes it)")


def check_writable(path: Path) -> None:
    """What :func:`write` refuses, checked before the replays are derived (minutes of work)."""
    _no_linked_folder(path)
    if path.parent.is_dir():  # a folder not made yet holds nothing to refuse
        for out in (path, path.with_suffix(".yaml")):
            check_output(out, OUTPUT, renews=[out])  # the derived file it renews


def write(rows, info: dict[str, Any], path: Path) -> None:
    """The replays as CSV and what they are as YAML beside it, each replaced whole through a
    temporary file; a link, a FIFO or a device at either name is refused (both checked
    before either is written), never followed, written into or replaced."""
    import yaml

    check_writable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    yaml_path = path.with_suffix(".yaml")
    replace_output(path, lambda tmp: rows.to_csv(tmp, index=False, float_format="%.6g"),
                   OUTPUT, renews=[path])
    replace_output(yaml_path, lambda tmp: tmp.write_text(yaml.safe_dump(info, sort_keys=False)),
                   OUTPUT, renews=[yaml_path])


def read(path: Path, grid: Grid | None = None):
    """(the replays, their YAML) from a derived file; with ``grid``, refused when the grid's
    stored runs are not those the replays were derived from. Both files are read as regular
    files (a link at either name is refused, never followed) of a bounded size, and every
    field read is checked: a problem is one InputError naming the file, the key and what is
    allowed."""
    import pandas as pd

    try:
        raw = read_regular(Path(path), ROLE, REPLAYS_MOST)
    except OSError as exc:
        raise InputError(path, None, f"cannot read it: {exc.strerror or exc}") from None
    if raw is None:
        raise InputError(path, None, "no replays derived yet",
                         allowed="the file 'iolab search-replay' writes")
    info = _info(path.with_suffix(".yaml"))
    if grid is not None and info["grid_digest"] != grid.digest():
        raise InputError(path.with_suffix(".yaml"), "grid_digest", "the grid's stored runs "
                         "changed since these replays were derived; derive them again with: "
                         + info["command"])
    try:
        rows = pd.read_csv(io.BytesIO(raw), keep_default_na=False, na_values=[""])
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError is a ValueError
        raise InputError(path, None, f"is not the CSV table of replays: {excerpt(str(exc))}",
                         allowed="the file 'iolab search-replay' writes") from None
    _check_rows(path, rows)
    return rows, info


_DIGEST = re.compile(r"[0-9a-f]{64}")
_COMMAND = re.compile(r"iolab search-replay [ -~]{1,400}")  # one line of printable ASCII
_NUMBERS = ("budget", "budget_share", "seed", "runs_used", "configurations")
_FLAGS = ("in_best_set", "is_grid_answer")


def _info(path: Path) -> dict[str, Any]:
    """The YAML beside the replays, with the fields :func:`read` uses checked."""
    info = read_file(path, "what derived replays are", INFO_MOST)
    if not isinstance(info, dict):
        raise InputError(path, None, "is not a mapping",
                         allowed="the file 'iolab search-replay' writes")
    checks = {"grid_digest": (_DIGEST, "64 lower-case hexadecimal digits (sha256)"),
              "command": (_COMMAND, "one line: iolab search-replay EXPERIMENT --env ENV ...")}
    for key, (pattern, allowed) in checks.items():
        value = info.get(key)
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise InputError(path, key, "is missing" if value is None else
                             f"is {type(value).__name__} {excerpt(value)}", allowed=allowed)
    return info


def _check_rows(path: Path, rows) -> None:
    """InputError naming the file and the column when the replays are not :data:`COLUMNS`
    with numbers and true/false where :func:`replay` writes them."""
    import pandas as pd

    if list(rows.columns) != COLUMNS:
        raise InputError(path, None, f"has the columns {excerpt(list(rows.columns))}",
                         allowed=", ".join(COLUMNS))
    for column in _NUMBERS:
        if not pd.api.types.is_numeric_dtype(rows[column]) or \
                pd.api.types.is_bool_dtype(rows[column]):
            raise InputError(path, column, "holds a value that is not a number",
                             allowed="numbers, as 'iolab search-replay' writes them")
    for column in _FLAGS:
        if not pd.api.types.is_bool_dtype(rows[column]):
            raise InputError(path, column, "holds a value that is not True or False",
                             allowed="True or False")
