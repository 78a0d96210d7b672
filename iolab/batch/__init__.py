"""Campaigns as Slurm batch jobs: ``iolab submit`` writes a batch script into the campaign's
folder and submits it; the job executes the experiment's notebook (``iolab notebook``), which
runs the campaign and keeps the executed notebook; ``iolab status`` reads the jobs back.

Modules: ``script`` (the text of a batch script), ``jobs`` (the campaign's job records and
their states), ``submit`` (checks, writing and submitting), ``job`` (what runs inside the job:
the notebook, Slurm's warning before the time limit, resubmission).

Responsible for: campaigns as batch jobs. Not responsible for: measuring (``iolab.execution.runner``
does it in the job as anywhere) or talking to Slurm (``iolab.host.slurm``).
"""
