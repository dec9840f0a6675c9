#!/bin/bash
#SBATCH --tasks=6 --tasks-per-node=3
#SBATCH --workdir=/w --cluster=c
#SBATCH -t 00:00:30
srun true
