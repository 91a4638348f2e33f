"""The program of the XGBoost case, at /opt/train/xgb_check.py in every pod.

Wired by the DMLC_* variables, as Kubeflow Trainer's XGBoost runtime expects: the pod of task 0
runs the Rabit tracker on DMLC_TRACKER_PORT, and every pod (task 0 too) joins it at
DMLC_TRACKER_URI, all-reduces rank + 1 and prints one E2E-RESULT line for the harness.
"""
import json
import os
import socket

import numpy
from xgboost import collective
from xgboost.tracker import RabitTracker


def main():
    task_id = int(os.environ["DMLC_TASK_ID"])
    workers = int(os.environ["DMLC_NUM_WORKER"])
    port = int(os.environ["DMLC_TRACKER_PORT"])
    tracker = None
    if task_id == 0:
        # sortby="task": ranks follow DMLC_TASK_ID instead of the workers' addresses.
        tracker = RabitTracker(host_ip="0.0.0.0", n_workers=workers, port=port, sortby="task")
        tracker.start(workers)
    with collective.CommunicatorContext(dmlc_tracker_uri=os.environ["DMLC_TRACKER_URI"],
                                        dmlc_tracker_port=port, dmlc_task_id=str(task_id)):
        rank, world = collective.get_rank(), collective.get_world_size()
        total = collective.allreduce(numpy.array([rank + 1], dtype=numpy.float64), collective.Op.SUM)
        result = {"rank": rank, "world": world, "host": socket.gethostname(), "sum": int(total[0])}
        print("E2E-RESULT " + json.dumps(result), flush=True)
    if tracker is not None:
        tracker.join()


if __name__ == "__main__":
    main()
