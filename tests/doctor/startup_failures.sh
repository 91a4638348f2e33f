#!/usr/bin/env bash
# Makes the real launchers fail the ways policies/startup-failures.yaml knows, and keeps what each
# printed: OUTDIR/<failure name>.log. tests/server/test_doctor_cluster.cpp serves each as a pod's
# log and checks that doctor --logs names that failure, so every entry of the file is worded as
# the program words it (OpenSSH, Open MPI and MPICH as Debian ships them, torch's c10d).
#
#   tests/doctor/startup_failures.sh OUTDIR
#
# Loopback only (an sshd of its own on 127.0.0.1, names under .invalid that never resolve); each
# program bounded by `timeout`. Needs root for sshd's privilege separation, as CI runs.
set -uo pipefail
out="${1:?usage: startup_failures.sh OUTDIR}"
mkdir -p "$out"
work="$(mktemp -d)"
sshd_pid=""
cleanup() { [ -z "$sshd_pid" ] || kill "$sshd_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
python=/usr/bin/python3  # Debian's, with python3-torch
free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
run() {  # run NAME COMMAND...: its output, both streams, into OUTDIR/NAME.log
  local name="$1"; shift
  timeout 60 "$@" >"$out/$name.log" 2>&1 || true
}
quiet_ssh=(-o BatchMode=yes -o ConnectTimeout=5 -o LogLevel=ERROR)

run ssh-unresolved-host ssh "${quiet_ssh[@]}" nosuchhost.invalid true
run ssh-refused ssh "${quiet_ssh[@]}" -p 1 127.0.0.1 true

# An sshd of its own: it knows no key of the client, and the client knows none of its host keys.
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/client_key"
mkdir -p /run/sshd
port="$(free_port)"
cat >"$work/sshd_config" <<CONFIG
Port $port
ListenAddress 127.0.0.1
HostKey $work/host_key
PidFile none
AuthorizedKeysFile none
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
CONFIG
/usr/sbin/sshd -D -e -f "$work/sshd_config" 2>"$work/sshd.log" &
sshd_pid=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
run ssh-publickey ssh "${quiet_ssh[@]}" -p "$port" -i "$work/client_key" -o IdentitiesOnly=yes \
  -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null 127.0.0.1 true
: >"$work/known_hosts"
run ssh-host-key ssh "${quiet_ssh[@]}" -p "$port" -o StrictHostKeyChecking=yes \
  -o UserKnownHostsFile="$work/known_hosts" 127.0.0.1 true

# Open MPI: a host that does not resolve, too few slots, root without leave.
printf 'nosuchhost.invalid slots=1\n' >"$work/unresolved"
run openmpi-daemons mpirun.openmpi --allow-run-as-root -np 2 --hostfile "$work/unresolved" true
printf 'localhost slots=1\n' >"$work/one-slot"
run openmpi-slots mpirun.openmpi --allow-run-as-root -np 4 --hostfile "$work/one-slot" true
run openmpi-run-as-root env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
  mpirun.openmpi -np 1 true
# MPICH's Hydra given Open MPI's hostfile.
run mpich-openmpi-hostfile mpiexec.hydra -f "$work/one-slot" -n 2 true

# torch: a worker whose master's name has no record (it retries, then its store times out), and a
# master whose port is taken.
run torch-master-unresolved "$python" -c '
import datetime, torch.distributed as d
d.init_process_group("gloo", init_method="tcp://nosuchhost.invalid:29500", rank=1, world_size=2,
                     timeout=datetime.timedelta(seconds=3))'
cp "$out/torch-master-unresolved.log" "$out/torch-connect-timeout.log"
taken="$(free_port)"
"$python" -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', $taken)); s.listen(); time.sleep(30)" &
holder=$!
sleep 1
run torch-port-in-use "$python" -c "
import datetime, torch.distributed as d
d.init_process_group('gloo', init_method='tcp://127.0.0.1:$taken', rank=0, world_size=2,
                     timeout=datetime.timedelta(seconds=3))"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
ls "$out"
