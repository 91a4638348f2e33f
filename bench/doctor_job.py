"""Writes a live JobSet of N pods (1 master, N-1 workers in one Job) as `kubectl get -o json`
lists it, made live as tests/doctor/make_fixtures.py makes its fixtures: what bench/doctor_bench
serves on the fake API server to time `trainenv doctor` on a large job.

  /usr/bin/python3 bench/doctor_job.py --trainenv build/trainenv --pods 1000 > job.json
"""
import argparse
import copy
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "doctor"))
import make_fixtures  # noqa: E402  (the fixtures' own way of making a job live)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainenv", required=True)
    parser.add_argument("--pods", type=int, default=1000)
    args = parser.parse_args()
    job = copy.deepcopy(make_fixtures.example("jobset-master-worker.yaml"))
    worker = next(r for r in job["spec"]["replicatedJobs"] if r["name"] == "worker")
    worker["replicas"] = 1
    worker["template"]["spec"]["parallelism"] = args.pods - 1
    worker["template"]["spec"]["completions"] = args.pods - 1
    live = make_fixtures.Live(make_fixtures.preview(args.trainenv, job))
    json.dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
               "items": live.items()}, sys.stdout)


if __name__ == "__main__":
    main()
