"""One campaign (an experiment in an environment) as the CLI and the notebooks use it.

``Campaign("smt_thp", "kvm-2vcpu", data_dir=..., overrides=[...])`` resolves the experiment,
loads and validates its spec, and offers the plan, the run and the tidy table. Campaigns
imported from AiSIO archives (``aisio-<name>``) have no spec; :func:`source` gives their tidy
source.

Responsible for: joining the registry, the spec, the store and the runner behind one object.
Not responsible for: any of those.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iolab.core import datadir, registry
from iolab.core import spec as specmod
from iolab.core.experiment import Experiment
from iolab.core.planner import MAX_RUNS, Plan
from iolab.core.store import Store, open_store
from iolab.execution.host_plan import design_plan, plan_for
from iolab.execution import options as run_options
from iolab.execution.runner import CampaignResult, run_campaign
from iolab.importers.aisio import PREFIX, ImportedCampaign
from iolab.paths import resolve_data_dir

if TYPE_CHECKING:  # pandas is imported where a table is made: running a campaign needs none
    import pandas as pd


def source(name: str) -> Experiment | ImportedCampaign:
    """The tidy source of a campaign name: an experiment, or an imported campaign."""
    if name.startswith(PREFIX):
        return ImportedCampaign(name)
    return registry.get(name)


class Campaign:
    def __init__(self, experiment: str | Experiment, environment: str, *,
                 data_dir: str | Path | None = None,
                 overrides: list[str] | dict[str, Any] | None = None,
                 params_dir: Path | None = None):
        self.experiment = (registry.get(experiment) if isinstance(experiment, str)
                           else experiment)
        self.environment = environment
        self.data_dir = datadir.check(resolve_data_dir(data_dir))
        # as given, before its links were resolved: a run writes there (datadir.check)
        self._data_given = data_dir or os.environ.get("IOLAB_DATA")
        self.spec = specmod.load(self.experiment, environment,
                                 params_dir=params_dir or self.experiment.params_dir,
                                 overrides=overrides)

    @property
    def store(self) -> Store:
        return open_store(self.experiment, self.environment, self.data_dir)

    def where(self, items: list[str] | dict[str, Any] | None) -> dict[str, list[Any]]:
        return specmod.parse_where(self.spec, self.experiment.schema(), items)

    def plan(self, *, where: list[str] | dict[str, Any] | None = None,
             limit: int | None = None, as_recorded: bool = False,
             max_runs: int = MAX_RUNS) -> Plan:
        """Against the store and this host (touches nothing); with ``as_recorded``, against
        the host that made the stored runs, when there are any."""
        host = self.store.read_host() if as_recorded else None
        return plan_for(self.experiment, self.spec, self.data_dir, where=self.where(where),
                        limit=limit, recorded_host=host, max_runs=max_runs)

    def design(self) -> Plan:
        """The whole design's size and cost, regardless of store and host."""
        return design_plan(self.experiment, self.spec)

    def run(self, *, where: list[str] | dict[str, Any] | None = None, limit: int | None = None,
            **options: Any) -> CampaignResult:
        """Run the campaign; ``options`` are :class:`~iolab.execution.options.RunOptions`'
        fields (looked up when called: the one definition of the run options)."""
        if self._data_given:  # the runner checks the resolved path as it starts writing
            datadir.refuse_redirected(Path(os.path.abspath(self._data_given)))
        return run_campaign(self.experiment, self.spec, self.data_dir,
                            run_options.RunOptions(where=self.where(where), limit=limit,
                                                   **options))

    @staticmethod
    def split(rows: pd.DataFrame, plan: Plan) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(the rows of the runs ``plan`` counts as stored, matched by run id; the others):
        a chapter shows the first and only lists the second."""
        if rows.empty:
            return rows, rows
        planned = rows["run.id"].isin({r.run_id for r in plan.by_status("stored")})
        return rows[planned].reset_index(drop=True), rows[~planned]

    def tidy(self, **options: Any) -> pd.DataFrame:
        """The tidy table of this campaign's stored runs (empty when nothing is stored)."""
        import pandas as pd

        from iolab.core import tidy

        if not self.store.root.exists():
            return pd.DataFrame()
        return tidy.load(self.data_dir, self.experiment, self.environment, **options)
