#!/bin/bash
#SBATCH -N1 -n1 --gpus-per-node=2
#SBATCH hetjob
#SBATCH -N 3 --cpus-per-task=4 -t 1-02:03 --array=0-7%2 -w n[1-3]
srun true
