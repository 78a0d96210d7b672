#!/bin/bash
# iolab batch job: experiment smt_thp, environment hpc-server, mode run.
# Written by 'iolab submit' (iolab 0.2.0) at 2026-11-24 09:00:00 UTC.
# Submit it again, recording the new job for 'iolab status', with
#   iolab submit smt_thp --env hpc-server --data /srv/iolab/data --resume
#SBATCH --job-name=iolab-run-data-91122ecf
#SBATCH --output=/srv/iolab/data/raw/smt_thp/hpc-server/jobs/%j.out
#SBATCH --error=/srv/iolab/data/raw/smt_thp/hpc-server/jobs/%j.err
#SBATCH --chdir=/srv/iolab
#SBATCH --exclusive
#SBATCH --nodes=1
#SBATCH --signal=B:USR1@300
#SBATCH --dependency=singleton
#SBATCH --partition=nvme
#SBATCH --time=12:00:00
#SBATCH --mem=0

# Slurm sends SIGUSR1 to this process 300 s before the time limit: iolab
# finishes the run in progress, restores every system setting it changed
# and stops. The stored runs are kept; 'iolab submit ... --resume' goes on
# with the rest (this job submits it itself: --resubmit).
# SIGUSR1 is ignored until iolab sets its handler: a warning in the
# job's first moment would otherwise end it before it starts (an ignore
# outlives exec). A warning lost so leaves the stop to the time limit.
trap '' USR1
exec /srv/iolab/.venv/bin/python -m iolab notebook smt_thp \
    --env hpc-server --mode run \
    --data /srv/iolab/data \
    --set runtime_s=30 \
    --where engine=io_uring \
    --resubmit \
    --output /srv/iolab/data/raw/smt_thp/hpc-server/jobs/"${SLURM_JOB_ID}".ipynb
