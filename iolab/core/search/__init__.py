"""Searching a grid instead of sweeping it: the adaptive search of an experiment's space.

A params file may name one of its grids as searched (``search:``, :mod:`iolab.core.search.params`).
A strategy (:mod:`iolab.core.search.strategies`) then asks for runs of the grid's points one at a
time and ends with an answer (:mod:`iolab.core.search.answer`); the runs it asks for are ordinary
stored runs with the ordinary identity. The same strategy code runs against three sources of
measurements (:mod:`iolab.core.search.oracle`): the store, inside a plan (a run not stored yet is
what the plan asks for next); a replay of a full grid's stored repetitions
(:mod:`iolab.core.search.replay`); and scripted values in tests.

Responsible for: the search's params, strategies, oracles, answer and replay.
Not responsible for: making runs (``iolab.execution.runner``) or planning the rest of the design
(``iolab.core.planner`` calls :func:`iolab.core.search.plan.run`).
"""
