"""Every registered experiment agrees with its notebook and its params files."""

from __future__ import annotations

import pytest

from iolab import experiments, spec as specmod
from iolab.paths import NOTEBOOKS_DIR


@pytest.mark.parametrize("name", sorted(experiments.EXPERIMENTS))
def test_knob_variables_are_variables_of_the_notebook(name):
    base = specmod.read_parameters_cell(NOTEBOOKS_DIR / f"{name}.ipynb")["base"]
    module = experiments.get(name)
    assert set(module.KNOB_VARIABLES) <= set(base), "a knob is mapped from a variable the notebook lacks"


@pytest.mark.parametrize("name", sorted(experiments.EXPERIMENTS))
def test_every_params_file_validates(name):
    envs = specmod.environments(name)
    assert envs, f"no params file for {name}"
    for env in envs:
        spec = specmod.load(name, env)
        assert experiments.get(name).tool(spec.scalar_settings()).driver_path.exists()
